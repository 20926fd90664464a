/**
 * The insights page's data source: the scopes this caller may read (queues and projects),
 * the observed insights of one scope (only the latest request counts), and the what-if
 * replay. Normalizing and rendering stay in insightsmodel.ts and the view.
 */

import type { GpuPlatService } from '../api/request';
import type { IProject, IQueue } from '../api/types';

export type InsightsService = Pick<GpuPlatService, 'queues' | 'projects' | 'insights' | 'whatif'>;

export class InsightsSource {
  constructor(private _service: InsightsService) {}

  /** The queues and projects the selector offers. */
  scopes(): Promise<[IQueue[], IProject[]]> {
    return Promise.all([this._service.queues(), this._service.projects()]);
  }

  /**
   * `GET insights` for `query`; answers `null` when a later `insights()` started meanwhile
   * (its answer wins), and throws only when this one is still the latest.
   */
  async insights(query: Record<string, string>): Promise<Record<string, any> | null> {
    const seq = ++this._seq;
    try {
      const raw = await this._service.insights(query);
      return seq === this._seq ? raw : null;
    } catch (error) {
      if (seq !== this._seq) {
        return null;
      }
      throw error;
    }
  }

  /** `POST whatif`: a recorded period replayed under changed queue settings. */
  whatif(body: Record<string, any>): Promise<Record<string, any>> {
    return this._service.whatif(body);
  }

  private _seq = 0;
}
