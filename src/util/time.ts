/** Timestamps are stored as integer microseconds since the epoch: portable, sortable and exact. */
let last = 0;

/** Current time in microseconds; strictly increasing within this process. */
export function nowMicros(): number {
  const t = Math.floor((performance.timeOrigin + performance.now()) * 1000);
  last = t > last ? t : last + 1;
  return last;
}

let lastSecond = NaN;
let lastBase = '';

/** ISO 8601 with microseconds and an explicit UTC offset, as the reference prints: 2026-07-20T09:14:03.512345+00:00 */
export function isoMicros(us: number): string {
  // Listings format two timestamps per row, and rows made together share their second: the
  // date-and-time part is formatted once per second.
  const second = Math.floor(us / 1_000_000);
  if (second !== lastSecond) {
    lastBase = new Date(second * 1000).toISOString().slice(0, 19);
    lastSecond = second;
  }
  const frac = String(us - second * 1_000_000).padStart(6, '0');
  return `${lastBase}.${frac}+00:00`;
}

export function httpDate(us: number): string {
  return new Date(Math.floor(us / 1000)).toUTCString();
}

export const DAY_MICROS = 86_400_000_000;
