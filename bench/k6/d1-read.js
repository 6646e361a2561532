// k6 version of `sluice bench d1-read`. See lib.js for BASE_URL, DB, PROTOCOL, VUS, DURATION.
import { options as opts, prepare, op } from './lib.js';

const DB = __ENV.DB || 'bench-d1';
export const options = opts({ vus: 10, duration: '600s' });

export function setup() {
  prepare('d1-read', DB, [
    ['CREATE TABLE IF NOT EXISTS test (id INTEGER PRIMARY KEY, timestamp TEXT, region TEXT)'],
    ["INSERT INTO test (timestamp, region) SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), 'seed' WHERE NOT EXISTS (SELECT 1 FROM test)"],
  ]);
}

export default function () {
  op(DB, 'SELECT * FROM test LIMIT 1', [], 'GET /d1/read');
}
