/** The notebook toolbar item of a GPU session: where its lease is, in one line, and what can be done. */

import { Widget } from '@lumino/widgets';

import { h } from '../dom';
import { sessionBarView } from '../../models/sessionmodel';

export interface ISessionBarActions {
  cancel: () => void;
  start: () => void;
  keep: () => void;
  why: () => void;
}

/** The notebook toolbar item: where the lease is, in one line, and what can be done. */
export class SessionBar extends Widget {
  constructor(actions: ISessionBarActions) {
    super();
    this.addClass('jp-GpuPlat-sessionBar');
    this.node.setAttribute('role', 'status');
    this.node.setAttribute('aria-live', 'polite');
    this._text = h('span', { class: 'jp-GpuPlat-sessionText' });
    const button = (label: string, cls: string, title: string, fn: () => void) =>
      h('button', { class: `jp-GpuPlat-sessionAction ${cls}`, title, onclick: fn }, label);
    this._cancel = button('Cancel', 'jp-GpuPlat-sessionCancel', 'Stop this GPU session: it leaves the queue', actions.cancel);
    this._keep = button('Keep session', 'jp-GpuPlat-sessionKeep', 'Start the idle clock again', actions.keep);
    this._why = button('Why?', 'jp-GpuPlat-sessionWhy', 'Show the session in the GPU platform sidebar', actions.why);
    this._start = button(
      'Start a new session',
      'jp-GpuPlat-sessionStart',
      "Lease a GPU again for this notebook: a new kernel (the last one's state is gone)",
      actions.start
    );
    this.node.append(this._text, this._start, this._keep, this._cancel, this._why);
    this.hide();
  }

  render(view: ReturnType<typeof sessionBarView>): void {
    this.node.dataset.state = view.state;
    this._text.textContent = view.text;
    this.node.title = view.text;
    this._cancel.hidden = !view.cancel;
    this._keep.hidden = !view.keep;
    this._why.hidden = !view.why;
    this._start.hidden = !view.start;
    this.setHidden(view.state === 'none');
  }

  private _text: HTMLElement;
  private _cancel: HTMLButtonElement;
  private _keep: HTMLButtonElement;
  private _why: HTMLButtonElement;
  private _start: HTMLButtonElement;
}
