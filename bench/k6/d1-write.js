// k6 version of `sluice bench d1-write`. See lib.js for BASE_URL, DB, PROTOCOL, VUS, DURATION.
import { options as opts, prepare, op } from './lib.js';

const DB = __ENV.DB || 'bench-d1';
export const options = opts({ vus: 10, duration: '600s' });

export function setup() {
  prepare('d1-write', DB, [
    ['CREATE TABLE IF NOT EXISTS test (id INTEGER PRIMARY KEY, timestamp TEXT, region TEXT)'],
    ["INSERT INTO test (timestamp, region) SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), 'seed' WHERE NOT EXISTS (SELECT 1 FROM test)"],
  ]);
}

export default function () {
  op(DB, "INSERT INTO test (timestamp, region) VALUES (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), ?)", [__ENV.REGION || 'local'], `GET /d1/write?region=${__ENV.REGION || 'local'}`);
}
