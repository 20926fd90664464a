/** The submit form's state and the run request it makes (pure; submit.ts is the dialog). */

import type { IResources, IRunRequest } from './types';

export interface ISubmitState {
  script: string;
  args: string;
  name: string;
  project: string;
  presets: string[];
  queue: string;
  gpu: string;
  cpu: string;
  memory: string;
  env: string;
}

/** Split a command line into arguments: whitespace separates, quotes group, backslash escapes. */
export function splitArgs(text: string): string[] {
  const out: string[] = [];
  let cur = '';
  let quote: string | null = null;
  let has = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === quote) {
        quote = null;
      } else if (c === '\\' && quote === '"' && i + 1 < text.length) {
        cur += text[++i];
      } else {
        cur += c;
      }
    } else if (c === '"' || c === "'") {
      quote = c;
      has = true;
    } else if (c === '\\' && i + 1 < text.length) {
      cur += text[++i];
      has = true;
    } else if (/\s/.test(c)) {
      if (has) {
        out.push(cur);
        cur = '';
        has = false;
      }
    } else {
      cur += c;
      has = true;
    }
  }
  if (has) {
    out.push(cur);
  }
  return out;
}

/**
 * The run request the form describes, or the reasons it cannot be sent. Only what the
 * user set is sent: everything else comes from the project defaults and the presets.
 */
export function buildRunRequest(s: ISubmitState): { request: IRunRequest | null; errors: string[] } {
  const errors: string[] = [];
  const script = s.script.trim().replace(/^\/+/, '');
  if (!script) {
    errors.push('Choose a .py or .ipynb file.');
  } else if (!/\.(py|ipynb)$/.test(script)) {
    errors.push(`${script} is not a .py or .ipynb file.`);
  }
  if (!s.project) {
    errors.push('Choose a project.');
  }
  const resources: IResources = {};
  if (s.gpu.trim()) {
    const n = Number(s.gpu);
    if (!Number.isInteger(n) || n < 0) {
      errors.push(`GPUs must be a whole number ≥ 0, not ${s.gpu.trim()}.`);
    } else {
      resources.gpu = n;
    }
  }
  if (s.cpu.trim()) {
    resources.cpu = s.cpu.trim();
  }
  if (s.memory.trim()) {
    resources.memory = s.memory.trim();
  }
  const env: Array<{ name: string; value: string | null }> = [];
  for (const raw of s.env.split('\n')) {
    const line = raw.trim();
    if (!line) {
      continue;
    }
    const eq = line.indexOf('=');
    if (eq <= 0) {
      errors.push(`Environment line "${line}" is not NAME=value.`);
      continue;
    }
    env.push({ name: line.slice(0, eq).trim(), value: line.slice(eq + 1) });
  }
  if (errors.length) {
    return { request: null, errors };
  }
  // The run starts in the file's directory, so the script's relative paths work there.
  const slash = script.lastIndexOf('/');
  const request: IRunRequest = { project: s.project, script, working_dir: slash > 0 ? script.slice(0, slash) : '.' };
  const args = splitArgs(s.args);
  if (args.length) {
    request.args = args;
  }
  if (s.name.trim()) {
    request.name = s.name.trim();
  }
  if (s.presets.length) {
    request.presets = [...s.presets];
  }
  if (s.queue) {
    request.queue = s.queue;
  }
  if (Object.keys(resources).length) {
    request.resources = resources;
  }
  if (env.length) {
    request.env = env;
  }
  return { request, errors };
}
