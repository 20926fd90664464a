/**
 * Wire shapes of the gpuplat REST API (`/gpuplat/api`), as the sidebar reads them.
 *
 * Generated, not copied: the service's response models (jupyter_gpuplat/service/schemas/models.py)
 * make the OpenAPI document (`labextension/openapi.json`, written by
 * `jlpm gen:openapi`), and `jlpm gen:types` (run by every build) turns it into
 * `api.gen.ts`. These are the names the views use for those generated types.
 */

import type { components } from './api.gen';

type Schemas = components['schemas'];

export type Status = Schemas['Status'];

/** Amounts as the service shows them (runs, quotas), or as a request gives them. */
export type IResources = Schemas['ResourceAmounts'] | Schemas['ResourcesSpec'];

export type IClocks = Schemas['Clocks'];

type MakeOptional<T, K extends keyof T> = Omit<T, K> & Partial<Pick<T, K>>;

/**
 * One row of `GET runs` (and the body of `POST runs`). A row the sidebar makes from a
 * status event, before the record arrives, lacks what the event does not carry.
 */
export type IRun = MakeOptional<
  Schemas['RunSummary'],
  'presets' | 'command' | 'pid' | 'presets_applied' | 'waiting'
>;

/** Why a run that has not started waits (`waiting` of a run): explain's reason and message. */
export type IRunWaiting = Schemas['RunWaiting'];

export type ITimelineEvent = Schemas['TimelineEvent'];

/** `GET runs/{id}`: the full record. */
export type IRunDetail = Schemas['RunDetail'];

export type IRunsPage = Omit<Schemas['RunsPage'], 'runs'> & { runs: IRun[] };

/** One `event: status` of `GET events`. */
export type IStatusEvent = Schemas['StatusEvent'];

/**
 * A waiting run's start estimate (`eta` of a run, explain, a preview): the service computes it and
 * words it (`text`); clients show `text`, never a duration of their own from `p50_at`.
 */
export type IStartEstimate = Schemas['StartEstimate'];

/** One `event: eta` of `GET events`: the waiting runs whose start estimate moved (it has no id). */
export type IEtaEvent = Schemas['EtaEvent'];

/** One run of an `event: eta`: its new estimate, or why it has none. */
export type IEtaChange = Schemas['EtaChange'];

/** A way to start sooner a preview offers (`alternatives`), with its own estimate. */
export type ISoonerAlternative = Schemas['SoonerAlternative'];

/** `PATCH runs/{id}` of a sweep. */
export type ISweepChange = Schemas['SweepChange'];

export type IBestChild = Schemas['BestChild'];

export type IWhoCanAct = Schemas['WhoCanAct'];

export type IBlocker = Schemas['Blocker'];

/** `GET runs/{id}/explain`; `queue_usage.free_gpus` is null where the executor does not count GPUs. */
export type IExplain = Schemas['Explain'];

/** A queue; `pending_runs` lists the caller's visible pending runs with positions (others only counted). */
export type IQueue = MakeOptional<Schemas['QueueView'], 'pending_runs' | 'pending_hidden'>;

/** One pending run of a queue the caller may see, with its 1-based position. */
export type IPendingRun = Schemas['PendingEntry'];

export type IPlacement = Schemas['Placement'];

export type IPreset = Schemas['PresetView'];

export type IProject = Schemas['ProjectView'];

export type IWhoAmI = Schemas['WhoAmI'];

export type IViolation = Schemas['Violation'];

/** `POST runs/preview`. */
export type IPreview = Schemas['Preview'];

export type IOutputFile = Schemas['OutputFile'];

/** What the submit dialog sends to `runs/preview` and `POST runs`. */
export type IRunRequest = Schemas['RunRequest'];

/** One metric curve of `GET runs/{id}/metrics`, downsampled by the service (extremes kept). */
export type ICurve = Schemas['Curve'];

/** `GET runs/{id}/metrics`: one curve per metric name. */
export type IMetrics = Schemas['Metrics'];

export type ICapacity = Schemas['Capacity'];

export type IError = Schemas['Error'];

/** `GET compare`: what the Compare tab shows (models/comparemodel.ts computes from it). */
export type ICompare = Schemas['Compare'];

/** One child as `GET runs/{id}/compare` lists it (only what the sweep's chart reads). */
export interface ISweepPoint {
  id: string;
  params: Record<string, unknown>;
  value: number | null;
}

/** A running stream; `close()` ends it for good (no reconnect). */
export interface IStreamHandle {
  close(): void;
}

/** Where a Server-Sent Events stream stands. */
export type StreamState = 'connecting' | 'live' | 'reconnecting' | 'closed';
