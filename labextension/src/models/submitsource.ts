/**
 * The submit form's and presets page's data source: a project's presets, the preview of a
 * request (the policy's verdict and the resolved config) and sending it. The form's logic
 * stays in submitmodel.ts; the views render what this answers.
 */

import type { GpuPlatService } from '../api/request';
import type { IPreset, IPreview, IRun, IRunRequest } from '../api/types';

export type SubmitService = Pick<GpuPlatService, 'presets' | 'preview' | 'submit'>;

export class SubmitSource {
  constructor(private _service: SubmitService) {}

  presets(project?: string): Promise<IPreset[]> {
    return this._service.presets(project);
  }

  preview(req: IRunRequest): Promise<IPreview> {
    return this._service.preview(req);
  }

  submit(req: IRunRequest): Promise<IRun> {
    return this._service.submit(req);
  }
}
