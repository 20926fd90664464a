import { Dialog } from '@jupyterlab/apputils';

import { h } from '../dom';
import type { IRun } from '../../api/types';
import type { ISubmittable, SubmitForm } from './submit';

/**
 * The dialog: Submit is enabled only while the preview allows the run (the reason sits
 * beside it otherwise); it sends the request and closes only when the service accepts it;
 * a refusal keeps it open with the service's message and hint.
 */
export class SubmitDialog extends Dialog<IRun | null> {
  constructor(
    private _form: SubmitForm,
    title = 'Submit to GPU queue'
  ) {
    super({
      title,
      body: _form,
      buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Submit' })],
      focusNodeSelector: 'input[name="script"], input[name="command"]'
    });
    this.addClass('jp-GpuPlat-submitDialog');
    this._reason = h('span', { class: 'jp-GpuPlat-submitReason', role: 'status', 'aria-live': 'polite' });
    const footer = this.node.querySelector('.jp-Dialog-footer');
    footer?.prepend(this._reason);
    _form.submittableChanged.connect((_, s) => this._show(s));
    this._show(_form.submittable);
  }

  resolve(index?: number): void {
    const i = index ?? 1;
    const accept = i === 1;
    if (!accept) {
      super.resolve(i);
      return;
    }
    if (this._busy || !this._form.submittable.ok) {
      return;
    }
    this._busy = true;
    void this._form.submit().then(ok => {
      this._busy = false;
      if (ok && !this.isDisposed) {
        super.resolve(i);
      }
    });
  }

  private _show(s: ISubmittable): void {
    const button = this.node.querySelector<HTMLButtonElement>('.jp-Dialog-footer .jp-mod-accept');
    if (button) {
      button.disabled = !s.ok;
      button.title = s.ok ? 'Send the run to its queue' : s.reason;
    }
    this._reason.textContent = s.ok ? '' : s.reason;
    this._reason.dataset.ok = String(s.ok);
  }

  private _busy = false;
  private _reason: HTMLElement;
}
