/**
 * Summarises a V8 `.cpuprofile` (from `node --cpu-prof`): self time by function and by package/file,
 * and inclusive time by function (a sample counts once for every function on its stack), so a report
 * can say what dominates.
 *
 *   npx tsx bench/profile.ts <file.cpuprofile> [top] [--window window.json]
 *
 * `--window` keeps the samples between `from` and `to` (µs, the profile's monotonic clock): the live
 * bench writes the measured burst's window there (bench/cases/liveRelay.ts, CAIPAY_BENCH_PROFILE_DIR).
 */
import fs from 'node:fs'

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  children?: number[]
}
interface Profile {
  startTime: number
  endTime: number
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
}

export interface ProfileSummary {
  /** CPU time of JavaScript, GC and native calls (idle excluded). */
  totalMs: number
  /** Length of the profiled window. */
  wallMs: number
  byFunction: { name: string; ms: number; share: number }[]
  byModule: { name: string; ms: number; share: number }[]
  /** Time with the function anywhere on the stack. */
  inclusive: { name: string; ms: number; share: number }[]
}

function moduleOf(url: string): string {
  if (!url) return '(native/vm)'
  const nm = url.lastIndexOf('node_modules/')
  if (nm !== -1) {
    const rest = url.slice(nm + 13).split('/')
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!
  }
  if (url.startsWith('node:')) return url
  const src = url.indexOf('/src/')
  return src !== -1 ? url.slice(src + 1) : url
}

const idle = new Set(['(idle)', '(program)', '(root)'])

export function summariseProfile(
  file: string,
  top = 15,
  window?: { from: number; to: number },
): ProfileSummary {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const parent = new Map<number, number>()
  for (const n of profile.nodes) for (const child of n.children ?? []) parent.set(child, n.id)
  const self = new Map<number, number>()
  let at = profile.startTime
  for (const [i, id] of profile.samples.entries()) {
    at += profile.timeDeltas[i] ?? 0
    if (window && (at < window.from || at > window.to)) continue
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0))
  }
  const keyOf = (node: ProfileNode) => {
    const { functionName, url, lineNumber } = node.callFrame
    return `${functionName || '(anonymous)'} ${moduleOf(url)}:${lineNumber + 1}`
  }
  const fn = new Map<string, number>()
  const mod = new Map<string, number>()
  const inclusive = new Map<string, number>()
  let total = 0
  for (const [id, us] of self) {
    const node = byId.get(id)!
    const { functionName, url } = node.callFrame
    if (idle.has(functionName)) continue
    total += us
    const key = keyOf(node)
    fn.set(key, (fn.get(key) ?? 0) + us)
    const m = functionName === '(garbage collector)' ? '(gc)' : moduleOf(url)
    mod.set(m, (mod.get(m) ?? 0) + us)
    const onStack = new Set<string>()
    for (let n: number | undefined = id; n !== undefined; n = parent.get(n)) {
      const frame = byId.get(n)!
      if (!idle.has(frame.callFrame.functionName)) onStack.add(keyOf(frame))
    }
    for (const k of onStack) inclusive.set(k, (inclusive.get(k) ?? 0) + us)
  }
  const rank = (m: Map<string, number>) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, us]) => ({ name, ms: us / 1000, share: us / total }))
  return {
    totalMs: total / 1000,
    wallMs: window ? (window.to - window.from) / 1000 : (profile.endTime - profile.startTime) / 1000,
    byFunction: rank(fn),
    byModule: rank(mod),
    inclusive: rank(inclusive),
  }
}

if (process.argv[1]?.endsWith('profile.ts') && process.argv[2]) {
  const args = process.argv.slice(3)
  const w = args.indexOf('--window')
  const window = w === -1 ? undefined : JSON.parse(fs.readFileSync(args[w + 1]!, 'utf8'))
  const topArg = args.find((a, i) => /^\d+$/.test(a) && args[i - 1] !== '--window')
  const s = summariseProfile(process.argv[2], Number(topArg ?? 25), window)
  const line = (r: { share: number; ms: number; name: string }) =>
    `${(r.share * 100).toFixed(1).padStart(5)}% ${r.ms.toFixed(0).padStart(6)} ms  ${r.name}`
  console.log(`busy ${s.totalMs.toFixed(0)} ms of ${s.wallMs.toFixed(0)} ms`)
  console.log('-- by module')
  for (const r of s.byModule) console.log(line(r))
  console.log('-- by function (self)')
  for (const r of s.byFunction) console.log(line(r))
  console.log('-- by function (inclusive)')
  for (const r of s.inclusive) console.log(line(r))
}
