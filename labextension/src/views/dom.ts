/** A small DOM builder for the views (text is always set as text, never as HTML). */

import type { IConfigRow } from '../models/provenance';

export type Child = Node | string | null | undefined | false;

export interface IAttrs {
  class?: string;
  title?: string;
  role?: string;
  [key: string]: string | number | boolean | undefined | ((ev: any) => void);
}

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: IAttrs | null = null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === false) {
        continue;
      }
      if (k.startsWith('on') && typeof v === 'function') {
        el.addEventListener(k.slice(2).toLowerCase(), v as EventListener);
      } else if (k === 'class') {
        el.className = String(v);
      } else if (v === true) {
        el.setAttribute(k, '');
      } else {
        el.setAttribute(k, String(v));
      }
    }
  }
  append(el, children);
  return el;
}

export function append(el: HTMLElement, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) {
      continue;
    }
    el.append(typeof c === 'string' ? document.createTextNode(c) : c);
  }
}

/** A section with a heading, used by the run detail. */
export function section(title: string, cls: string, ...children: Child[]): HTMLElement {
  return h('section', { class: `jp-GpuPlat-section ${cls}`, 'aria-label': title }, h('h3', { class: 'jp-GpuPlat-sectionTitle' }, title), ...children);
}

/** Hand a Blob to the browser as a file download. */
export function saveBlob(blob: Blob, filename: string): void {
  const url = URL.createObjectURL(blob);
  const a = h('a', { href: url, download: filename, style: 'display:none' });
  document.body.append(a);
  a.click();
  a.remove();
  window.setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** Message and hint of an error, as the service gave them. */
export function errorBox(error: unknown): HTMLElement {
  const e = error as { message?: string; hint?: string };
  return h(
    'div',
    { class: 'jp-GpuPlat-error', role: 'alert' },
    h('div', { class: 'jp-GpuPlat-errorMessage' }, e?.message ?? String(error)),
    e?.hint ? h('div', { class: 'jp-GpuPlat-errorHint' }, e.hint) : null
  );
}

/** The resolved spec, one row per field with the layer that set it (run detail and submit preview). */
export function configTable(rows: IConfigRow[]): HTMLElement {
  return h(
    'table',
    { class: 'jp-GpuPlat-configTable' },
    h('thead', null, h('tr', null, h('th', null, 'Field'), h('th', null, 'Value'), h('th', null, 'Set by'))),
    h(
      'tbody',
      null,
      ...rows.map(r =>
        h(
          'tr',
          { 'data-path': r.path },
          h('td', { class: 'jp-GpuPlat-configPath', title: r.path }, ...breakable(r.path)),
          h('td', { class: `jp-GpuPlat-configValue${NUMBER.test(r.value) ? ' jp-mod-number' : ''}`, title: r.value }, r.value),
          h('td', { class: 'jp-GpuPlat-configLayer' }, h('span', { class: `jp-GpuPlat-layer jp-mod-${r.layerKind}`, title: r.layer }, r.layer))
        )
      )
    )
  );
}

// Values that read as one number (`86400`, `0.5`, `16Gi`, `1,024`): never broken mid-digit.
const NUMBER = /^[-+]?[\d.,_]+\s?[A-Za-z%]{0,3}$/;

/** A dotted path with break opportunities after its dots and brackets (`resources.<wbr>gpu`), not inside names. */
function breakable(path: string): Child[] {
  const out: Child[] = [];
  for (const part of path.split(/(?<=[.[\]])/)) {
    out.push(part, h('wbr'));
  }
  out.pop();
  return out;
}
