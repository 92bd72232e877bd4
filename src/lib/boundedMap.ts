/**
 * Sets a key in a map that a caller may grow without end (one entry per
 * address or payload it names), keeping it to `max` entries: the key moves
 * to the newest place, and past the bound the oldest one is dropped.
 */
export function rememberBounded<K, V>(map: Map<K, V>, key: K, value: V, max: number): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > max) {
    const oldest = map.keys().next();
    if (!oldest.done) map.delete(oldest.value);
  }
}
