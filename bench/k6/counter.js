// k6 version of `sluice bench counter`. See lib.js for BASE_URL, DB, PROTOCOL, VUS, DURATION.
import { options as opts, prepare, op } from './lib.js';

const DB = __ENV.DB || 'bench-counter';
export const options = opts({ vus: 150, duration: '3s' });

export function setup() {
  prepare('counter', DB, [
    ['CREATE TABLE IF NOT EXISTS counters (id TEXT PRIMARY KEY, count INTEGER NOT NULL)'],
    ["INSERT OR IGNORE INTO counters (id, count) VALUES ('count_up', 0)"],
  ]);
}

export default function () {
  op(DB, "UPDATE counters SET count = count + 1 WHERE id = 'count_up' RETURNING count", [], 'POST /count_up');
}
