/**
 * The notebook sessions' data source (the toolbar of each notebook and their controller): my
 * unfinished sessions, a notebook's latest one, re-reading and explaining one, keeping or
 * stopping it, and its lease following the notebook when it moves.
 */

import type { GpuPlatService } from '../api/request';
import type { IExplain, IRun, IRunDetail } from '../api/types';

export type SessionService = Pick<
  GpuPlatService,
  'sessions' | 'latestSession' | 'getRun' | 'explain' | 'stop' | 'keepalive' | 'moveSession'
>;

export class SessionSource {
  constructor(private _service: SessionService) {}

  /** My unfinished GPU sessions, newest first; only those of `notebook` when given. */
  sessions(notebook?: string): Promise<IRun[]> {
    return this._service.sessions(notebook);
  }

  /** `user`'s newest session of `notebook`, ended ones too; null if it never had one. */
  latestSession(notebook: string, user: string): Promise<IRun | null> {
    return this._service.latestSession(notebook, user);
  }

  getRun(id: string): Promise<IRunDetail> {
    return this._service.getRun(id);
  }

  explain(id: string): Promise<IExplain> {
    return this._service.explain(id);
  }

  stop(id: string): Promise<IRunDetail> {
    return this._service.stop(id);
  }

  /** "Keep session": the idle clock starts again. */
  keepalive(id: string): Promise<IRun> {
    return this._service.keepalive(id);
  }

  /** The notebook moved: the lease follows (the service's `runChanged` tells the runs list). */
  moveSession(id: string, notebook: string): Promise<IRunDetail> {
    return this._service.moveSession(id, notebook);
  }
}
