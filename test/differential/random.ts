/** A small seeded generator (mulberry32): the same seed gives the same mutants on every machine. */
export interface Random {
  /** An integer in [0, n). */
  int(n: number): number
}

export function seededRandom(seed: number): Random {
  let state = seed >>> 0
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  return { int: (n) => Math.floor(next() * n) }
}

/** The campaign's size: bounded in `npm test`, long under `npm run fuzz` (FUZZ=long). */
export function campaign(short: number, long: number): { seed: number; count: number } {
  const seed = process.env.FUZZ_SEED
    ? Number(process.env.FUZZ_SEED)
    : process.env.FUZZ === 'long'
      ? Date.now() % 2 ** 31
      : 27
  return {
    seed,
    count: process.env.FUZZ_COUNT
      ? Number(process.env.FUZZ_COUNT)
      : process.env.FUZZ === 'long'
        ? long
        : short,
  }
}
