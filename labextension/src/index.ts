import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { listIcon } from '@jupyterlab/ui-components';

import { GpuPlatPanel } from './panel';

export { requestAPI, GpuPlatAPIError, API_NAMESPACE } from './request';
export { GpuPlatPanel } from './panel';

/** The id of the sidebar widget (also its restorer key). */
export const SIDEBAR_ID = 'jupyter-gpuplat-sidebar';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-gpuplat:plugin',
  description: 'GPU platform sidebar: queues, usage and pending runs.',
  autoStart: true,
  optional: [ILayoutRestorer],
  activate: (app: JupyterFrontEnd, restorer: ILayoutRestorer | null) => {
    const panel = new GpuPlatPanel();
    panel.id = SIDEBAR_ID;
    panel.title.icon = listIcon;
    panel.title.caption = 'GPU platform';
    app.shell.add(panel, 'left', { rank: 900 });
    if (restorer) {
      restorer.add(panel, SIDEBAR_ID);
    }
    console.log('JupyterLab extension jupyter-gpuplat is activated!');
  }
};

export default plugin;
