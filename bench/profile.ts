/**
 * Summarises a V8 `.cpuprofile` (from `node --cpu-prof`): self time by function and by package/file,
 * so a report can say what dominates.   npx tsx bench/profile.ts <file.cpuprofile> [top]
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

export function summariseProfile(file: string, top = 15): ProfileSummary {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const self = new Map<number, number>()
  for (const [i, id] of profile.samples.entries()) {
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0))
  }
  const fn = new Map<string, number>()
  const mod = new Map<string, number>()
  let total = 0
  for (const [id, us] of self) {
    const node = byId.get(id)!
    const { functionName, url, lineNumber } = node.callFrame
    if (functionName === '(idle)' || functionName === '(program)') continue
    total += us
    const key = `${functionName || '(anonymous)'} ${moduleOf(url)}:${lineNumber + 1}`
    fn.set(key, (fn.get(key) ?? 0) + us)
    const m = functionName === '(garbage collector)' ? '(gc)' : moduleOf(url)
    mod.set(m, (mod.get(m) ?? 0) + us)
  }
  const rank = (m: Map<string, number>) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, us]) => ({ name, ms: us / 1000, share: us / total }))
  return {
    totalMs: total / 1000,
    wallMs: (profile.endTime - profile.startTime) / 1000,
    byFunction: rank(fn),
    byModule: rank(mod),
  }
}

if (process.argv[1]?.endsWith('profile.ts') && process.argv[2]) {
  const s = summariseProfile(process.argv[2], Number(process.argv[3] ?? 25))
  console.log(`busy ${s.totalMs.toFixed(0)} ms of ${s.wallMs.toFixed(0)} ms`)
  console.log('-- by module')
  for (const r of s.byModule) console.log(`${(r.share * 100).toFixed(1).padStart(5)}%  ${r.name}`)
  console.log('-- by function (self)')
  for (const r of s.byFunction) console.log(`${(r.share * 100).toFixed(1).padStart(5)}%  ${r.name}`)
}
