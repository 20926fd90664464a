/**
 * Wire shapes of the gpuplat REST API (`/gpuplat/api`), as the sidebar reads them.
 *
 * The service's pydantic views (jupyter_gpuplat/service/views.py) are the source of
 * truth; only the fields the sidebar uses are listed.
 */

export type Status =
  | 'created'
  | 'queued'
  | 'dispatched'
  | 'starting'
  | 'running'
  | 'stopping'
  | 'succeeded'
  | 'failed'
  | 'stopped';

export interface IResources {
  gpu?: number | null;
  cpu?: string | number | null;
  memory?: string | number | null;
}

export interface IClocks {
  queue_wait_seconds: number | null;
  start_wait_seconds: number | null;
  run_seconds: number | null;
}

/** One row of `GET runs` (and the body of `POST runs`). */
export interface IRun {
  id: string;
  seq: number;
  project: string;
  user: string;
  name: string | null;
  kind: string;
  queue: string;
  status: Status;
  reason: string;
  message: string;
  resources: IResources;
  presets?: string[];
  devices: number[];
  exit_code: number | null;
  command?: string[] | null;
  clocks: IClocks;
  created_at: number | null;
  queued_at: number | null;
  dispatched_at: number | null;
  started_at: number | null;
  finished_at: number | null;
  updated_at: number | null;
}

export interface ITimelineEvent {
  id?: number;
  status: Status;
  reason: string;
  message: string;
  at: number;
  details?: Record<string, unknown> | null;
}

/** `GET runs/{id}`: the full record. */
export interface IRunDetail extends IRun {
  presets: string[];
  request: Record<string, unknown> | null;
  resolved: Record<string, unknown>;
  provenance: Record<string, string>;
  timeline: ITimelineEvent[];
  stop_requested_by: string | null;
}

export interface IRunsPage {
  runs: IRun[];
  next_before: number | null;
}

/** One `event: status` of `GET events`. */
export interface IStatusEvent {
  id: number;
  run_id: string;
  project: string;
  queue: string;
  user: string;
  name: string | null;
  status: Status;
  reason: string;
  message: string;
  at: number;
  details?: Record<string, unknown>;
}

export interface IWhoCanAct {
  who: string;
  can: string;
}

export interface IBlocker {
  id: string | null;
  name: string | null;
  user: string | null;
  project: string;
  status: string;
  gpu: number;
  devices: number[] | null;
}

/** `GET runs/{id}/explain`. */
export interface IExplain {
  run_id: string;
  status: Status;
  queue: string;
  layer: 'queue' | 'executor' | 'running' | 'done' | string;
  reason: string;
  message: string;
  numbers?: Record<string, number>;
  position: number | null;
  pending_in_queue?: number;
  blockers: IBlocker[];
  queue_usage?: {
    runs: number;
    concurrency: number | null;
    gpu: number;
    gpu_quota: number | null;
    pending: number;
    free_gpus: number;
  };
  details?: Record<string, unknown>;
  who_can_act: IWhoCanAct[];
}

export interface IQueue {
  name: string;
  priority: number;
  concurrency: number | null;
  quota: IResources;
  max_per_user: number | null;
  ordering: string;
  paused: boolean;
  usage: IResources & { runs: number };
  pending: number;
  head_wait: { reason: string; message: string } | null;
}

export interface IPlacement {
  node_selector?: Record<string, string | null> | null;
  tolerations?: Array<Record<string, unknown>> | null;
  affinity?: Record<string, unknown> | null;
  gpu_type?: string | null;
}

export interface IPreset {
  name: string;
  description: string;
  kind: string | null;
  queue: string | null;
  resources: IResources | null;
  placement: IPlacement | null;
  image: string | null;
  env: Array<{ name: string; value: string | null }> | null;
  termination: { timeout_seconds?: number | null; idle_seconds?: number | null } | null;
  locked: string[];
  merge: string;
}

export interface IProject {
  name: string;
  description: string;
  role: 'viewer' | 'member' | 'admin' | null;
  default_queue: string | null;
  default_presets: string[];
  usable_queues: string[];
  usable_presets: string[];
  max_run_resources: IResources | null;
}

export interface IWhoAmI {
  user: string;
  platform_admin: boolean;
  projects: Array<{ name: string; role: string | null }>;
}

export interface IViolation {
  code: string;
  message: string;
  hint: string;
}

/** `POST runs/preview`. */
export interface IPreview {
  resolved: Record<string, unknown>;
  provenance: Record<string, string>;
  layers: string[];
  verdict: { allowed: boolean; violations: IViolation[] };
}

export interface IOutputFile {
  path: string;
  size: number;
  modified: number;
}

/** What the submit dialog sends to `runs/preview` and `POST runs`. */
export interface IRunRequest {
  project: string;
  script: string;
  args?: string[];
  name?: string;
  presets?: string[];
  queue?: string;
  resources?: IResources;
  env?: Array<{ name: string; value: string | null }>;
}

/** One metric curve of `GET runs/{id}/metrics`, downsampled by the service (extremes kept). */
export interface ICurve {
  steps: number[];
  /** null where the run logged NaN or infinity */
  values: Array<number | null>;
  /** points before downsampling */
  count: number;
}

/** `GET runs/{id}/metrics`: one curve per metric name. */
export type IMetrics = Record<string, ICurve>;
