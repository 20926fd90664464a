/** The panel's header (title, user, stream state, Submit…) and its tab strip. */

import { Widget } from '@lumino/widgets';

import { h } from '../dom';
import type { StreamState } from '../../api/types';

const STATE_TEXT: Record<StreamState, string> = {
  connecting: 'connecting…',
  live: '● live',
  reconnecting: 'reconnecting…',
  closed: 'disconnected'
};

export class PanelHeader extends Widget {
  constructor(submit: () => void) {
    super({ node: h('div', { class: 'jp-GpuPlat-header' }) });
    this._state = h('span', { class: 'jp-GpuPlat-conn', role: 'status', title: 'Live status stream' }, 'connecting…');
    this._user = h('span', { class: 'jp-GpuPlat-muted jp-GpuPlat-user' });
    this.node.append(
      h('span', { class: 'jp-GpuPlat-title' }, 'GPU platform'),
      this._user,
      h('span', { class: 'jp-GpuPlat-spacer' }),
      this._state,
      h(
        'button',
        { class: 'jp-GpuPlat-button jp-mod-accept jp-GpuPlat-submitButton', title: 'Submit a .py or .ipynb file to a GPU queue', onclick: () => submit() },
        'Submit…'
      )
    );
  }

  set user(text: string) {
    this._user.textContent = text;
    this._user.title = text; // shown whole on hover when the sidebar is narrow
  }

  set state(s: StreamState) {
    this._state.textContent = STATE_TEXT[s];
    this._state.dataset.state = s;
  }

  private _state: HTMLElement;
  private _user: HTMLElement;
}

/** A WAI-ARIA tablist: click or arrow keys select a tab. */
export class TabStrip<T extends string> extends Widget {
  constructor(
    tabs: ReadonlyArray<{ name: T; label: string }>,
    onSelect: (name: T) => void
  ) {
    super({ node: h('div', { class: 'jp-GpuPlat-tabs', role: 'tablist', 'aria-label': 'GPU platform views' }) });
    this._buttons = tabs.map(t =>
      h(
        'button',
        {
          class: 'jp-GpuPlat-tab',
          role: 'tab',
          id: `jp-GpuPlat-tab-${t.name}`,
          'data-tab': t.name,
          'aria-controls': `jp-GpuPlat-page-${t.name}`,
          onclick: () => onSelect(t.name)
        },
        t.label
      )
    );
    this.node.append(...this._buttons);
    this.node.addEventListener('keydown', ev => {
      const i = this._buttons.indexOf(document.activeElement as HTMLButtonElement);
      if (i < 0 || (ev.key !== 'ArrowRight' && ev.key !== 'ArrowLeft')) {
        return;
      }
      ev.preventDefault();
      const next = (i + (ev.key === 'ArrowRight' ? 1 : tabs.length - 1)) % tabs.length;
      onSelect(tabs[next].name);
      this._buttons[next].focus();
    });
  }

  /** Mark `name` as the current tab. */
  select(name: T): void {
    this._buttons.forEach(b => {
      const on = b.dataset.tab === name;
      b.setAttribute('aria-selected', String(on));
      b.tabIndex = on ? 0 : -1;
      b.classList.toggle('jp-mod-current', on);
    });
  }

  private _buttons: HTMLButtonElement[];
}
