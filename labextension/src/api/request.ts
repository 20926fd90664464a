/**
 * The one place that talks to the gpuplat service: every REST call and every
 * Server-Sent Events stream of the sidebar goes through `GpuPlatService`.
 *
 * Requests go through `ServerConnection.makeRequest`, which adds the Jupyter token and
 * XSRF headers (a plain EventSource cannot), so streams are read with fetch and parsed
 * by `SSEParser`.
 */

import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

import { GpuPlatAPIError } from './errors';
import { markRead } from './readclock';
import { SSEParser, ISSEvent } from './sse';
import type {
  ICompare,
  IEtaEvent,
  IExplain,
  IMetrics,
  IOutputFile,
  IPreset,
  IPreview,
  IProject,
  IQueue,
  IRun,
  IRunDetail,
  IRunRequest,
  IRunsPage,
  IStatusEvent,
  ISweepChange,
  ISweepPoint,
  IStreamHandle,
  IWhoAmI,
  StreamState
} from './types';

/** URL namespace of the gpuplat REST API, relative to the server base URL. */
export const API_NAMESPACE = 'gpuplat/api';

export { GpuPlatAPIError };

interface IErrorBody {
  error?: { code?: string; message?: string; hint?: string };
  message?: string;
}

function apiURL(settings: ServerConnection.ISettings, path: string, query?: Record<string, string>): string {
  const url = URLExt.join(settings.baseUrl, API_NAMESPACE, path);
  const q = query ? URLExt.objectToQueryString(query) : '';
  return url + q;
}

async function errorFrom(response: Response): Promise<GpuPlatAPIError> {
  const text = await response.text();
  let body: IErrorBody = {};
  try {
    body = JSON.parse(text) as IErrorBody;
  } catch {
    // not JSON: a proxy's error page; show its status line
  }
  const message = body.error?.message ?? body.message ?? `${response.status} ${response.statusText}`;
  return new GpuPlatAPIError(message, response.status, body.error?.code, body.error?.hint);
}

/**
 * Call the gpuplat API once and parse its JSON answer.
 *
 * @param path - path under `gpuplat/api`, e.g. `queues` or `runs/abc/explain`
 * @param init - fetch options (method, body, ...)
 */
export async function requestAPI<T>(
  path = '',
  init: RequestInit = {},
  settings: ServerConnection.ISettings = ServerConnection.makeSettings(),
  query?: Record<string, string>
): Promise<T> {
  const url = apiURL(settings, path, query);
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new ServerConnection.NetworkError(error as TypeError);
  }
  if (!response.ok) {
    throw await errorFrom(response);
  }
  const text = await response.text();
  if (!text) {
    return undefined as T;
  }
  try {
    return JSON.parse(text) as T;
  } catch (error) {
    throw new GpuPlatAPIError(`Invalid JSON from ${url}: ${String(error)}`, response.status);
  }
}

export type { IStreamHandle, StreamState };

export interface IEventStreamOptions {
  onEvent: (ev: IStatusEvent) => void;
  /** Start estimates that moved (`event: eta`: no id, so none is replayed after a drop; re-read the waiting runs then). */
  onEta?: (ev: IEtaEvent) => void;
  /** After the replay of missed events; `resumed` is false on the first connection. */
  onReady?: (resumed: boolean) => void;
  onState?: (state: StreamState) => void;
}

export interface ILogStreamOptions {
  /** Byte offset to start after (0: from the beginning). */
  offset?: number;
  /** Called with a batch of lines and the byte offset after the last one. */
  onLines: (lines: string[], offset: number) => void;
  /** The run ended and every line was sent. */
  onEnd?: (status: string) => void;
  onState?: (state: StreamState) => void;
}

const BACKOFF_MS = [250, 500, 1000, 2000, 4000, 8000];

/** Every REST and SSE call of the sidebar. Views never fetch by themselves. */
export class GpuPlatService {
  constructor(readonly settings: ServerConnection.ISettings = ServerConnection.makeSettings()) {}

  /** A run as the server answered a change that makes no status event (a session's notebook moved). */
  get runChanged(): ISignal<this, IRunDetail> {
    return this._runChanged;
  }

  private _runChanged = new Signal<this, IRunDetail>(this);

  private _get<T>(path: string, query?: Record<string, string>): Promise<T> {
    return requestAPI<T>(path, { method: 'GET' }, this.settings, query);
  }

  private _post<T>(path: string, body: unknown = {}): Promise<T> {
    return requestAPI<T>(path, { method: 'POST', body: JSON.stringify(body) }, this.settings);
  }

  whoami(): Promise<IWhoAmI> {
    return this._get('whoami');
  }

  async queues(): Promise<IQueue[]> {
    return (await this._get<{ queues: IQueue[] }>('queues')).queues;
  }

  pauseQueue(name: string): Promise<{ queue: IQueue }> {
    return this._post(`queues/${encodeURIComponent(name)}/pause`);
  }

  resumeQueue(name: string): Promise<{ queue: IQueue }> {
    return this._post(`queues/${encodeURIComponent(name)}/resume`);
  }

  /** `GET insights`: observed waits, usage and refusals (only what this caller may see). */
  insights(query: Record<string, string>): Promise<Record<string, any>> {
    return this._get('insights', query);
  }

  /** `POST whatif`: a recorded period replayed under changed queue settings. */
  whatif(body: Record<string, any>): Promise<Record<string, any>> {
    return this._post('whatif', body);
  }

  async projects(): Promise<IProject[]> {
    return (await this._get<{ projects: IProject[] }>('projects')).projects;
  }

  async presets(project?: string): Promise<IPreset[]> {
    const q = project ? { project } : undefined;
    return (await this._get<{ presets: IPreset[] }>('presets', q)).presets;
  }

  preview(req: IRunRequest): Promise<IPreview> {
    return this._post('runs/preview', req);
  }

  submit(req: IRunRequest): Promise<IRun> {
    return this._post('runs', req);
  }

  listRuns(query: Record<string, string>, before: number | null, limit: number): Promise<IRunsPage> {
    const q: Record<string, string> = { ...query, limit: String(limit) };
    if (before !== null) {
      q.before = String(before);
    }
    // each row's clocks are as of now: its ticking clock goes on from here (lifecycle.readAgo)
    return this._get<IRunsPage>('runs', q).then(page => (page.runs.forEach(r => markRead(r)), page));
  }

  getRun(id: string): Promise<IRunDetail> {
    return this._get<IRunDetail>(`runs/${encodeURIComponent(id)}`).then(run => markRead(run));
  }

  explain(id: string): Promise<IExplain> {
    return this._get(`runs/${encodeURIComponent(id)}/explain`);
  }

  stop(id: string): Promise<IRunDetail> {
    return this._post(`runs/${encodeURIComponent(id)}/stop`);
  }

  /** `GET compare`: runs side by side (params, config differences, metric summaries, curves). */
  compare(ids: string[], maxPoints = 500): Promise<ICompare> {
    return this._get('compare', { runs: ids.join(','), max_points: String(maxPoints) });
  }

  /** A sweep's children against its objective (`GET runs/{id}/compare`, no curves: `top=0`). */
  sweepPoints(id: string): Promise<{ objective: { metric?: string } | null; best: string | null; children: ISweepPoint[] }> {
    return this._get(`runs/${encodeURIComponent(id)}/compare`, { top: '0' });
  }

  /** A sweep's concurrency, or pausing/resuming its dispatch (PATCH runs/{id}); answers the sweep. */
  updateSweep(id: string, change: ISweepChange): Promise<IRunDetail> {
    return requestAPI<IRunDetail>(
      `runs/${encodeURIComponent(id)}`,
      { method: 'PATCH', body: JSON.stringify(change) },
      this.settings
    );
  }

  /** A session's notebook was renamed or moved: its lease follows (PATCH runs/{id}); answers the session. */
  async moveSession(id: string, notebook: string): Promise<IRunDetail> {
    const run = await requestAPI<IRunDetail>(
      `runs/${encodeURIComponent(id)}`,
      { method: 'PATCH', body: JSON.stringify({ notebook }) },
      this.settings
    );
    this._runChanged.emit(run);
    return run;
  }

  /** My unfinished GPU sessions, newest first; only those of `notebook` when given. */
  async sessions(notebook?: string): Promise<IRun[]> {
    const q = notebook ? { notebook } : undefined;
    return (await this._get<{ sessions: IRun[] }>('sessions', q)).sessions;
  }

  /** `user`'s newest GPU session of `notebook`, ended ones too (`GET runs?notebook=`); null if it never had one. */
  async latestSession(notebook: string, user: string): Promise<IRun | null> {
    const page = await this.listRuns({ kind: 'session', notebook, user }, null, 1);
    return page.runs[0] ?? null;
  }

  /** "Keep session": the session's idle clock starts again. */
  keepalive(id: string): Promise<IRun> {
    return this._post(`runs/${encodeURIComponent(id)}/keepalive`);
  }

  async outputs(id: string): Promise<IOutputFile[]> {
    return (await this._get<{ outputs: IOutputFile[] }>(`runs/${encodeURIComponent(id)}/outputs`)).outputs;
  }

  metrics(id: string, maxPoints = 400): Promise<IMetrics> {
    return this._get(`runs/${encodeURIComponent(id)}/metrics`, { max_points: String(maxPoints) });
  }

  /** One output file, as a Blob to hand to the browser's download. */
  outputBlob(id: string, path: string): Promise<Blob> {
    const p = path.split('/').map(encodeURIComponent).join('/');
    return this._blob(`runs/${encodeURIComponent(id)}/outputs/${p}`);
  }

  /** The whole log as plain text. */
  logBlob(id: string): Promise<Blob> {
    return this._blob(`runs/${encodeURIComponent(id)}/logs`, { format: 'text' });
  }

  private async _blob(path: string, query?: Record<string, string>): Promise<Blob> {
    const response = await ServerConnection.makeRequest(apiURL(this.settings, path, query), {}, this.settings);
    if (!response.ok) {
      throw await errorFrom(response);
    }
    return response.blob();
  }

  /**
   * Status changes of every visible run, live, reconnecting with backoff and resuming
   * after the last event id so nothing is missed across a drop.
   */
  events(opts: IEventStreamOptions): IStreamHandle {
    let lastId: string | null = null;
    let connectedOnce = false;
    return this._reconnecting(
      (): Record<string, string> => (lastId === null ? {} : { since: lastId }),
      'events',
      (ev: ISSEvent) => {
        if (ev.event === 'status') {
          if (ev.id !== null) {
            lastId = ev.id;
          }
          opts.onEvent(JSON.parse(ev.data) as IStatusEvent);
        } else if (ev.event === 'eta') {
          opts.onEta?.(JSON.parse(ev.data) as IEtaEvent);
        } else if (ev.event === 'ready') {
          const ready = JSON.parse(ev.data) as { last_event_id: number };
          if (lastId === null) {
            lastId = String(ready.last_event_id);
          }
          opts.onReady?.(connectedOnce);
          connectedOnce = true;
        }
      },
      () => false, // the events stream never ends by itself: reconnect
      opts.onState
    );
  }

  /** A run's log, following it until the run ends; resumes from the last byte offset. */
  logs(id: string, opts: ILogStreamOptions): IStreamHandle {
    let offset = opts.offset ?? 0;
    let ended = false;
    let batch: string[] = [];
    const flushLines = () => {
      if (batch.length) {
        const lines = batch;
        batch = [];
        opts.onLines(lines, offset);
      }
    };
    return this._reconnecting(
      () => ({ offset: String(offset) }),
      `runs/${encodeURIComponent(id)}/logs`,
      (ev: ISSEvent) => {
        if (ev.event === 'end') {
          const end = JSON.parse(ev.data) as { status: string; offset: number };
          ended = true;
          flushLines();
          opts.onEnd?.(end.status);
          return;
        }
        batch.push(ev.data);
        if (ev.id !== null) {
          offset = Number(ev.id);
        }
      },
      () => ended,
      opts.onState,
      flushLines
    );
  }

  /**
   * Read an SSE endpoint; on a drop, reconnect with backoff using `query()` (which
   * carries the resume point) until `done()` or `close()`.
   *
   * The backoff resets once the server answers; `flush` runs after each network
   * chunk so lines are handed over in batches.
   */
  private _reconnecting(
    query: () => Record<string, string>,
    path: string,
    onEvent: (ev: ISSEvent) => void,
    done: () => boolean,
    onState?: (s: StreamState) => void,
    flush?: () => void
  ): IStreamHandle {
    let closed = false;
    let controller: AbortController | null = null;
    let timer: number | null = null;
    let attempt = 0;
    const setState = (s: StreamState) => onState?.(s);

    const connect = async () => {
      if (closed) {
        return;
      }
      controller = new AbortController();
      setState(attempt === 0 ? 'connecting' : 'reconnecting');
      try {
        const url = apiURL(this.settings, path, query());
        const response = await ServerConnection.makeRequest(
          url,
          { signal: controller.signal, headers: { Accept: 'text/event-stream' } },
          this.settings
        );
        if (!response.ok) {
          throw await errorFrom(response);
        }
        if (!response.body) {
          throw new Error('streaming is not supported by this browser');
        }
        // the server answered: the connection is good again
        attempt = 0;
        setState('live');
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        const parser = new SSEParser();
        for (;;) {
          const { value, done: eof } = await reader.read();
          if (eof) {
            break;
          }
          for (const ev of parser.feed(value)) {
            onEvent(ev);
          }
          flush?.();
        }
      } catch (error) {
        if (closed) {
          return;
        }
        if (error instanceof GpuPlatAPIError && error.status >= 400 && error.status < 500) {
          // 403/404: reconnecting cannot help (the run is gone or not ours)
          console.warn(`gpuplat: ${path}: ${error.message}`);
          setState('closed');
          return;
        }
      }
      flush?.();
      if (closed || done()) {
        setState('closed');
        return;
      }
      const wait = BACKOFF_MS[Math.min(attempt, BACKOFF_MS.length - 1)];
      attempt += 1;
      setState('reconnecting');
      timer = window.setTimeout(() => void connect(), wait);
    };
    void connect();
    return {
      close: () => {
        closed = true;
        if (timer !== null) {
          window.clearTimeout(timer);
        }
        controller?.abort();
        setState('closed');
      }
    };
  }
}
