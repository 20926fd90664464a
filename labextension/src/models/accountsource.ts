/**
 * Who the caller is and what is theirs: identity and projects (the panel's header, filters and
 * forms) and the caller's waiting runs (the notifications' long
 * waits). Small reads with no state of their own.
 */

import type { GpuPlatService } from '../api/request';
import type { IProject, IRunsPage, IWhoAmI } from '../api/types';

export type AccountService = Pick<GpuPlatService, 'whoami' | 'projects' | 'listRuns'>;

/** How many of my waiting runs the notifications read at most. */
const WAITING_LIMIT = 1000;

export class AccountSource {
  constructor(private _service: AccountService) {}

  /** Identity and projects, read together. */
  identity(): Promise<[IWhoAmI, IProject[]]> {
    return Promise.all([this._service.whoami(), this._service.projects()]);
  }

  /** `user`'s runs still in our queue (phase `dispatch`). */
  waitingRuns(user: string): Promise<IRunsPage> {
    return this._service.listRuns({ user, phase: 'dispatch' }, null, WAITING_LIMIT);
  }
}
