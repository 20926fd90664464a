/** The compare tab's data source: the runs side by side (params, config differences, metrics, curves). */

import type { GpuPlatService } from '../api/request';
import type { ICompare } from '../api/types';

export class CompareSource {
  constructor(
    private _service: Pick<GpuPlatService, 'compare'>,
    readonly ids: string[]
  ) {}

  load(): Promise<ICompare> {
    return this._service.compare(this.ids);
  }
}
