/**
 * One run's data source, for its detail (in the sidebar or a main-area tab): the record, its
 * explain, outputs, metrics and log stream, stopping it, and a sweep's points and changes. The
 * detail's parts call it and render what it answers; `runChanged` tells them the record the
 * service answered last (read, stopped, a sweep changed).
 */

import { ISignal, Signal } from '@lumino/signaling';

import type { GpuPlatService, ILogStreamOptions } from '../api/request';
import type { IExplain, IMetrics, IOutputFile, IRunDetail, ISweepChange, ISweepPoint, IStreamHandle } from '../api/types';

/** The service calls one run's detail makes. */
export type RunDetailService = Pick<
  GpuPlatService,
  'getRun' | 'explain' | 'outputs' | 'outputBlob' | 'stop' | 'logs' | 'logBlob' | 'metrics' | 'sweepPoints' | 'updateSweep'
>;

export class RunDetailSource {
  constructor(
    private _service: RunDetailService,
    readonly runId: string
  ) {}

  /** The record as the service answered it last (null before the first read). */
  get run(): IRunDetail | null {
    return this._run;
  }

  /** The service answered a record: read, stopped, or (a sweep) changed. */
  get runChanged(): ISignal<this, IRunDetail> {
    return this._runChanged;
  }

  /** Read the record. */
  async load(): Promise<IRunDetail> {
    return this._answered(await this._service.getRun(this.runId));
  }

  explain(): Promise<IExplain> {
    return this._service.explain(this.runId);
  }

  outputs(): Promise<IOutputFile[]> {
    return this._service.outputs(this.runId);
  }

  outputBlob(path: string): Promise<Blob> {
    return this._service.outputBlob(this.runId, path);
  }

  metrics(): Promise<IMetrics> {
    return this._service.metrics(this.runId);
  }

  /** The log, following the run until it ends. */
  logs(opts: ILogStreamOptions): IStreamHandle {
    return this._service.logs(this.runId, opts);
  }

  /** The whole log as plain text. */
  logBlob(): Promise<Blob> {
    return this._service.logBlob(this.runId);
  }

  async stop(): Promise<IRunDetail> {
    return this._answered(await this._service.stop(this.runId));
  }

  /** A sweep's children against its objective. */
  sweepPoints(): Promise<{ objective: { metric?: string } | null; best: string | null; children: ISweepPoint[] }> {
    return this._service.sweepPoints(this.runId);
  }

  /** A sweep's concurrency, or pausing/resuming its dispatch; answers the sweep. */
  async updateSweep(change: ISweepChange): Promise<IRunDetail> {
    return this._answered(await this._service.updateSweep(this.runId, change));
  }

  dispose(): void {
    Signal.clearData(this);
  }

  private _answered(run: IRunDetail): IRunDetail {
    this._run = run;
    this._runChanged.emit(run);
    return run;
  }

  private _run: IRunDetail | null = null;
  private _runChanged = new Signal<this, IRunDetail>(this);
}
