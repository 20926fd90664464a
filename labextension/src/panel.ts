import { Widget } from '@lumino/widgets';

import { GpuPlatAPIError, requestAPI } from './request';

/** Resource amounts as the API reports them (only `gpu` is shown here). */
export interface IResources {
  gpu?: number;
  cpu?: number;
  memory?: number | string;
  [key: string]: unknown;
}

/** One queue of `GET gpuplat/api/queues` (fields this panel reads). */
export interface IQueue {
  name: string;
  priority?: number;
  paused?: boolean;
  quota?: IResources;
  usage?: IResources & { runs?: number };
  pending?: number;
  running?: number;
}

type QueuesReply = IQueue[] | { queues?: IQueue[] };

/** The left-sidebar panel: lists the queues with usage and pending counts. */
export class GpuPlatPanel extends Widget {
  constructor() {
    super();
    this.addClass('jp-GpuPlat-panel');

    const header = document.createElement('div');
    header.className = 'jp-GpuPlat-header';
    const title = document.createElement('span');
    title.className = 'jp-GpuPlat-title';
    title.textContent = 'GPU queues';
    this._refreshButton = document.createElement('button');
    this._refreshButton.className = 'jp-GpuPlat-refresh jp-mod-styled';
    this._refreshButton.textContent = 'Refresh';
    this._refreshButton.title = 'Reload the queues';
    this._refreshButton.addEventListener('click', () => void this.refresh());
    header.append(title, this._refreshButton);

    this._status = document.createElement('div');
    this._status.className = 'jp-GpuPlat-status';
    this._list = document.createElement('ul');
    this._list.className = 'jp-GpuPlat-queueList';

    this.node.append(header, this._status, this._list);
  }

  /** Fetch the queues and render them (or the error). */
  async refresh(): Promise<void> {
    this._status.className = 'jp-GpuPlat-status';
    this._status.textContent = 'Loading…';
    try {
      const reply = await requestAPI<QueuesReply>('queues');
      const queues = Array.isArray(reply) ? reply : (reply?.queues ?? []);
      this._render(queues);
    } catch (error) {
      this._renderError(error);
    }
  }

  protected onAfterShow(): void {
    void this.refresh();
  }

  private _render(queues: IQueue[]): void {
    this._list.replaceChildren();
    this._status.textContent = queues.length === 0 ? 'No queues configured.' : '';
    for (const queue of queues) {
      const item = document.createElement('li');
      item.className = 'jp-GpuPlat-queue';
      item.dataset.queue = queue.name;
      if (queue.paused) {
        item.classList.add('jp-mod-paused');
      }

      const name = document.createElement('span');
      name.className = 'jp-GpuPlat-queueName';
      name.textContent = queue.name;
      item.append(name);

      const quotaGpu = queue.quota?.gpu;
      if (quotaGpu !== undefined && quotaGpu !== null) {
        const usage = document.createElement('span');
        usage.className = 'jp-GpuPlat-queueUsage';
        usage.textContent = `${queue.usage?.gpu ?? 0}/${quotaGpu} GPU`;
        item.append(usage);
      }

      const pendingCount = queue.pending;
      if (pendingCount !== undefined && pendingCount !== null) {
        const pending = document.createElement('span');
        pending.className = 'jp-GpuPlat-queuePending';
        pending.textContent = `${pendingCount} pending`;
        item.append(pending);
      }

      if (queue.paused) {
        const paused = document.createElement('span');
        paused.className = 'jp-GpuPlat-queuePaused';
        paused.textContent = 'paused';
        item.append(paused);
      }
      this._list.append(item);
    }
  }

  private _renderError(error: unknown): void {
    this._list.replaceChildren();
    this._status.className = 'jp-GpuPlat-status jp-GpuPlat-error';
    const message = document.createElement('div');
    message.className = 'jp-GpuPlat-errorMessage';
    message.textContent = error instanceof Error ? error.message : String(error);
    this._status.replaceChildren(message);
    if (error instanceof GpuPlatAPIError && error.hint) {
      const hint = document.createElement('div');
      hint.className = 'jp-GpuPlat-errorHint';
      hint.textContent = error.hint;
      this._status.append(hint);
    }
  }

  private _refreshButton: HTMLButtonElement;
  private _status: HTMLDivElement;
  private _list: HTMLUListElement;
}
