/**
 * CPU time by process from /proc (Linux): what a request costs in the server process, in PostgreSQL
 * (postmaster, backends, background workers, and reaped children) and in the load generator. A
 * sampling profiler cannot tell this: a process preempted inside a syscall keeps "using" its stack.
 * Also the resident memory of a process. Elsewhere these return undefined and the figures are left out.
 */
import { readdirSync, readFileSync } from 'node:fs'

const ticksPerSecond = 100

interface Stat {
  pid: number
  ppid: number
  /** user + system, this process and its reaped children, milliseconds. */
  ms: number
}

function stat(pid: number): Stat | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // Fields after the command name (which may hold spaces) start at state.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ')
    const [utime, stime, cutime, cstime] = [11, 12, 13, 14].map((i) => Number(fields[i]))
    return {
      pid,
      ppid: Number(fields[1]),
      ms: ((utime! + stime! + cutime! + cstime!) * 1000) / ticksPerSecond,
    }
  } catch {
    return undefined
  }
}

/** CPU milliseconds of `pid` alone. */
export function processCpuMs(pid: number): number | undefined {
  return stat(pid)?.ms
}

/** CPU milliseconds of `root` and every live descendant (exited ones count through their parent). */
export function treeCpuMs(root: number): number | undefined {
  let all: Stat[]
  try {
    all = readdirSync('/proc')
      .filter((name) => /^\d+$/.test(name))
      .map((name) => stat(Number(name)))
      .filter((s): s is Stat => s !== undefined)
  } catch {
    return undefined
  }
  const children = new Map<number, Stat[]>()
  for (const s of all) children.set(s.ppid, [...(children.get(s.ppid) ?? []), s])
  const top = all.find((s) => s.pid === root)
  if (!top) return undefined
  let total = 0
  const walk = (s: Stat) => {
    total += s.ms
    for (const c of children.get(s.pid) ?? []) walk(c)
  }
  walk(top)
  return total
}

/** Resident set size of `pid` in bytes (VmRSS of /proc/PID/status). */
export function residentBytes(pid: number): number | undefined {
  try {
    const kb = /^VmRSS:\s*(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]
    return kb === undefined ? undefined : Number(kb) * 1024
  } catch {
    return undefined
  }
}
