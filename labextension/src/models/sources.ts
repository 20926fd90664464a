/**
 * The sidebar's data sources, one per area (as JupyterLab's FileBrowserModel is the file
 * browser's): each owns its area's fetching, coalescing and the service calls, and says what
 * changed with Lumino signals. The plugin makes this with the service; views get their sources
 * from it and never hold the service, so they only compose and render.
 */

import type { GpuPlatService } from '../api/request';
import { AccountSource } from './accountsource';
import { CompareSource } from './comparesource';
import { InsightsSource } from './insightssource';
import { QueuesSource } from './queuessource';
import { RunDetailSource } from './rundetailsource';
import { RunsSource } from './runssource';
import { SessionSource } from './sessionsource';
import { SubmitSource } from './submitsource';
import { ISweepSourceOptions, SweepSource } from './sweepsource';

export class GpuPlatSources {
  constructor(private _service: GpuPlatService) {}

  /** The runs page: the runs model, the event stream, pages of `GET runs`. */
  runs(pageSize: number): RunsSource {
    return new RunsSource({ service: this._service, pageSize });
  }

  /** Expanded sweeps' children and re-reading sweeps, for the runs page. */
  sweeps(o: Omit<ISweepSourceOptions, 'service'>): SweepSource {
    return new SweepSource({ ...o, service: this._service });
  }

  /** One run, for its detail. */
  runDetail(id: string): RunDetailSource {
    return new RunDetailSource(this._service, id);
  }

  queues(): QueuesSource {
    return new QueuesSource(this._service);
  }

  insights(): InsightsSource {
    return new InsightsSource(this._service);
  }

  submit(): SubmitSource {
    return new SubmitSource(this._service);
  }

  sessions(): SessionSource {
    return new SessionSource(this._service);
  }

  compare(ids: string[]): CompareSource {
    return new CompareSource(this._service, ids);
  }

  /** Identity, projects, my waiting runs. */
  account(): AccountSource {
    return new AccountSource(this._service);
  }
}
