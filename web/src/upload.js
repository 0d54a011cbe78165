// Uploading a file as the table files.<name>: PUT /api/files/<name> with a multipart form
// whose part `file` holds the bytes (the form mindsdb_sdk's upload_file sends).

import { ApiError, answerOf, enc } from './api.js';

// The naming rule of the server (app/rules/names.py): 1-63 ASCII letters, digits, _ and -,
// not starting with a digit.
export const NAME_PATTERN = /^[A-Za-z_-][A-Za-z0-9_-]{0,62}$/;

// A table name from a file name: its extension dropped, every run of other characters made
// one "_", a leading digit given a prefix, cut to 63 characters.
export function tableName(fileName) {
  const dot = fileName.lastIndexOf('.');
  let base = dot > 0 ? fileName.slice(0, dot) : fileName;
  base = base.replace(/[^A-Za-z0-9_-]+/g, '_').replace(/^_+|_+$/g, '');
  if (!base) base = 'file';
  if (/^[0-9]/.test(base)) base = `file_${base}`;
  return base.slice(0, 63);
}

export function byteSize(n) {
  if (n < 1024) return `${n} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let value = n;
  let unit = -1;
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit += 1; }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

// XMLHttpRequest rather than fetch: it reports the upload's progress. Same origin, with the
// session cookie; the browser adds Sec-Fetch-Site and Origin, which the server checks.
export function sendFile(file, name, { overwrite = false, onProgress, signal } = {}) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('PUT', `/api/files/${enc(name)}${overwrite ? '?overwrite=true' : ''}`);
    xhr.setRequestHeader('Accept', 'application/json');
    xhr.upload.addEventListener('progress', (event) => {
      if (event.lengthComputable) onProgress?.(event.loaded, event.total);
    });
    xhr.addEventListener('load', () => {
      try { resolve(answerOf(xhr.status, xhr.responseText)); } catch (error) { reject(error); }
    });
    xhr.addEventListener('error', () => reject(new ApiError(0, { detail: 'The upload failed: the server could not be reached' })));
    xhr.addEventListener('abort', () => reject(new ApiError(0, { detail: 'The upload was stopped' })));
    signal?.addEventListener('abort', () => xhr.abort());
    const form = new FormData();
    form.append('source_type', 'file');
    form.append('name', name);
    form.append('source', name);
    form.append('original_file_name', file.name);
    form.append('file', file, file.name);
    xhr.send(form);
  });
}

// Whether a drag carries files (text and links are left to the editor).
export function carriesFiles(event) {
  return Array.from(event.dataTransfer?.types || []).includes('Files');
}
