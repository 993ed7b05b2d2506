// The README's code blocks, for the tests that run them.
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

const README = fileURLToPath(new URL('../../README.md', import.meta.url));

/** The fenced blocks whose info string is exactly `info` (`js`, `js browser`), in order. */
export function readmeBlocks(info) {
  const text = fs.readFileSync(README, 'utf8');
  return [...text.matchAll(/^```([^\n]*)\n([\s\S]*?)^```$/gm)].filter((m) => m[1].trim() === info).map((m) => m[2]);
}

/** The README's placeholders replaced by the test's server and app. */
export function localise(code, { url, appKey, pageOrigin, moduleURL }) {
  let out = code
    .replaceAll("'https://auth.example.com'", JSON.stringify(url))
    .replaceAll("'pk_live_example'", JSON.stringify(appKey));
  if (pageOrigin) out = out.replaceAll("'https://app.example.com/auth/callback'", JSON.stringify(`${pageOrigin}/auth/callback`));
  if (moduleURL) out = out.replaceAll("from 'gatehouse-js'", `from ${JSON.stringify(moduleURL)}`);
  return out;
}
