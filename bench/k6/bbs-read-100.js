// k6 version of `sluice bench bbs-read-100`. See lib.js for BASE_URL, DB, PROTOCOL, VUS, DURATION.
import { options as opts, prepare, op } from './lib.js';

const DB = __ENV.DB || 'bench-bbs';
export const options = opts({ vus: 100, duration: '30s' });

export function setup() {
  prepare('bbs-read-100', DB, [
    ['CREATE TABLE IF NOT EXISTS test (id INTEGER PRIMARY KEY AUTOINCREMENT, category TEXT, text TEXT)'],
    // 10,000 posts to read; the peer app inserts its own in /setup.
    ["INSERT INTO test (category, text) WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000) SELECT 'general', 'seeded post ' || i FROM n WHERE (SELECT count(*) FROM test) < 10000"],
  ]);
}

export default function () {
  op(DB, 'SELECT id, category, text FROM test ORDER BY id DESC LIMIT 100', [], 'GET /bbs/read_limit');
}
