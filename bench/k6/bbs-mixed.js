// k6 version of `sluice bench bbs-mixed`. See lib.js for BASE_URL, DB, PROTOCOL, VUS, DURATION.
import { options as opts, prepare, op } from './lib.js';

const DB = __ENV.DB || 'bench-bbs';
export const options = opts({ vus: 100, duration: '30s' });

export function setup() {
  prepare('bbs-mixed', DB, [
    ['CREATE TABLE IF NOT EXISTS test (id INTEGER PRIMARY KEY AUTOINCREMENT, category TEXT, text TEXT)'],
    // 10,000 posts to read; the peer app inserts its own in /setup.
    ["INSERT INTO test (category, text) WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000) SELECT 'general', 'seeded post ' || i FROM n WHERE (SELECT count(*) FROM test) < 10000"],
  ]);
}

export default function () {
  // write and read-all, alternating, as siege's mixed run did
  if (__ITER % 2 === 0) op(DB, 'INSERT INTO test (category, text) VALUES (?, ?)', ['general', 'Hello from the bench: a short BBS post of about twenty bytes.'], 'POST /bbs/write');
  else op(DB, 'SELECT id, category, text FROM test', [], 'GET /bbs/read');
}
