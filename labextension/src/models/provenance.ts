/** The resolved spec as rows, each with the layer that set it (the service's provenance). */

/** Lists merged by key, and the item fields that name an item (core/merge.py KEYED_LISTS). */
export const KEYED_LISTS: Record<string, string[]> = {
  env: ['name'],
  'placement.tolerations': ['key', 'effect'],
  volumes: ['name']
};

export interface IConfigRow {
  path: string;
  value: string;
  layer: string;
  layerKind: 'org' | 'project' | 'preset' | 'run' | 'request';
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function show(v: unknown): string {
  if (typeof v === 'string') {
    return v;
  }
  return JSON.stringify(v);
}

/** Leaf paths of a spec in the service's provenance syntax (`env[HF_HOME]`, `resources.gpu`). */
export function leafValues(spec: Record<string, unknown>): Array<[string, unknown]> {
  const out: Array<[string, unknown]> = [];
  const walk = (v: unknown, path: string) => {
    if (isPlainObject(v)) {
      for (const [k, child] of Object.entries(v)) {
        walk(child, path ? `${path}.${k}` : k);
      }
    } else if (path in KEYED_LISTS && Array.isArray(v) && v.every(isPlainObject)) {
      for (const item of v as Array<Record<string, unknown>>) {
        const key = KEYED_LISTS[path].map(f => (item[f] === null || item[f] === undefined ? '' : String(item[f]))).join(':');
        const rest: Record<string, unknown> = {};
        for (const [f, fv] of Object.entries(item)) {
          if (!KEYED_LISTS[path].includes(f)) {
            rest[f] = fv;
          }
        }
        const keys = Object.keys(rest);
        out.push([`${path}[${key}]`, keys.length === 1 && keys[0] === 'value' ? rest.value : rest]);
      }
    } else if (path) {
      out.push([path, v]);
    }
  };
  walk(spec, '');
  return out;
}

export function layerKind(label: string): IConfigRow['layerKind'] {
  if (label === 'org') {
    return 'org';
  }
  if (label === 'run') {
    return 'run';
  }
  if (label.includes('preset:')) {
    return label.startsWith('project:') ? 'project' : 'preset';
  }
  if (label.startsWith('project:')) {
    return 'project';
  }
  return 'request';
}

/**
 * The resolved spec, one row per leaf with the layer that set it. Fields the service
 * adds after merging (command, name) have no provenance and show as `request`.
 */
export function configRows(resolved: Record<string, unknown>, provenance: Record<string, string>): IConfigRow[] {
  return leafValues(resolved).map(([path, value]) => {
    const layer = provenance[path] ?? 'request';
    return { path, value: show(value), layer, layerKind: layerKind(layer) };
  });
}
