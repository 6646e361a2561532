// k6 version of `sluice bench bbs-write`. See lib.js for BASE_URL, DB, PROTOCOL, VUS, DURATION.
import { options as opts, prepare, op } from './lib.js';

const DB = __ENV.DB || 'bench-bbs';
export const options = opts({ vus: 100, duration: '30s' });

export function setup() {
  prepare('bbs-write', DB, [['CREATE TABLE IF NOT EXISTS test (id INTEGER PRIMARY KEY AUTOINCREMENT, category TEXT, text TEXT)']]);
}

export default function () {
  op(DB, 'INSERT INTO test (category, text) VALUES (?, ?)', ['general', 'Hello from the bench: a short BBS post of about twenty bytes.'], 'POST /bbs/write');
}
