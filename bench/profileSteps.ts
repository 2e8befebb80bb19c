/**
 * A live payment's server CPU by step, from a `bench:live` profile of the burst (CAIPAY_BENCH_PROFILE_DIR):
 * each sample of the window goes to the first step below whose code is on its stack, the server's
 * frames read through `dist/`'s source maps (so `npm run build` first, and profile that build).
 *
 *   npx tsx bench/profileSteps.ts <file.cpuprofile> --window <window.json> [--payers 100] [--dist <dir>]
 *
 * `--dist`: where the profiled build's `dist/` is now, when it was swapped out since. An `await` resumes
 * with a short stack, so the PostgreSQL driver's row gets every continuation that starts in it, and a
 * sample's time is the gap before it (as bench/profile.ts counts it): `writev` holds the time another
 * process took the core from the server. docs/performance.md, "Fifth round" (and "Solana, fifth round"
 * for the Solana steps, which a `--chain solana` profile fills).
 */
import fs from 'node:fs'
import { SourceMap } from 'node:module'
import { parseArgs } from 'node:util'

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number }
  children?: number[]
}
interface Profile {
  startTime: number
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
}

/** First match wins, in this order: a sample inside a step's code counts for that step. */
const steps: [string, RegExp][] = [
  ['GC', /:\(garbage collector\)$/],
  ['relay signing (viem, noble)', /viem.*:signTransaction$/],
  // A Solana confirm's Ed25519 checks (Node's crypto; web3.js's noble where it signs or verifies).
  ['Ed25519 checks (Solana)', /crypto\/sig:verifyOneShot|@noble\/curves.*ed25519/],
  [
    'confirm: gateway read, verify, hash, statement',
    /gateway\/confirm\.ts|evm\/driver\.ts|evm\/authorization\.ts|payerSignature\.ts|gateway\/payment\.ts|gateway\/option\.ts|relayGuards\.ts:(guardRefusal|assertRelayable)|lifecycle\.ts:(confirmWithJob|changePayments|transitionPayment)|solana\/driver\.ts|solana\/transaction\.ts|protocol\/solana\/|relayGuards\.ts:reserveExecutorFeeOrRaise/,
  ],
  ['status reads', /statusReads\.ts|views\.ts:findPaymentStatus|statusChanges\.ts|finalStatuses/],
  ['Solana jobs and watcher: claim, load, send, statuses', /solana\/(jobs|land|store|watcher)\.ts/],
  [
    'relay job: claim, load, simulate, sender group, send',
    /evm\/relay\.ts|evm\/transactions\.ts|evm\/sender\.ts|reserveExecutorFees|settlements\.ts:loadPaymentAndSettlement|jobs\/(runner|queue|fence)\.ts/,
  ],
  [
    'receipts (watcher), push scan',
    /evm\/watcher\.ts|evm\/push\.ts|evm\/transfers\.ts|evm\/nodes\.ts:fateOf/,
  ],
  ['finisher, settlement, ledger', /finisher\.ts|succeedPayments|settlementItems|settlementBatch|ledger\//],
  ['webhook outbox', /webhooks\//],
  [
    'Fastify, zod, HTTP, auth (per request)',
    /fastify|find-my-way|zod|_http_(incoming|outgoing|server|common)|src\/server\/(route|auth|app|cors|requestLog|metrics\/http|errors)\.ts|avvio|pino/,
  ],
  [
    'PostgreSQL driver (kysely, pg; writev)',
    /kysely|node_modules\/pg|pg-protocol|pg-pool|store\/prepared\.ts/,
  ],
  [
    'JSON-RPC transport (fetch or node:http, viem)',
    /undici|webstreams|viem|keepAliveFetch|evm\/nodes\.ts|_http_(client|agent)|@solana\/web3\.js|jayson|superstruct/,
  ],
]

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    window: { type: 'string' },
    payers: { type: 'string', default: '100' },
    dist: { type: 'string' },
  },
})
const file = positionals[0]
if (!file || !values.window)
  throw new Error('usage: profileSteps.ts <file.cpuprofile> --window <window.json>')
const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile
const window = JSON.parse(fs.readFileSync(values.window, 'utf8')) as { from: number; to: number }
const payers = Number(values.payers)
const nodes = new Map(profile.nodes.map((n) => [n.id, n]))
const parent = new Map<number, number>()
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)

const maps = new Map<string, SourceMap | undefined>()
function mapOf(url: string): SourceMap | undefined {
  if (!maps.has(url)) {
    let map: SourceMap | undefined
    try {
      let path = new URL(url).pathname
      if (values.dist) path = path.replace(/^.*\/dist\//, `${values.dist}/`)
      map = new SourceMap(JSON.parse(fs.readFileSync(`${path}.map`, 'utf8')))
    } catch {
      map = undefined
    }
    maps.set(url, map)
  }
  return maps.get(url)
}
const names = new Map<number, string>()
/** `source:function`, the server's frames by their TypeScript source. */
function nameOf(node: ProfileNode): string {
  let name = names.get(node.id)
  if (name === undefined) {
    const { url, functionName, lineNumber, columnNumber } = node.callFrame
    const fn = functionName || '(anonymous)'
    const map = url.includes('/dist/') && !url.includes('node_modules') ? mapOf(url) : undefined
    const source = map?.findEntry(lineNumber, columnNumber) as { originalSource?: string } | undefined
    name = `${(source?.originalSource ?? url) || '(native)'}:${fn}`.replace(
      /^.*?\/(src|node_modules)\//,
      '$1/',
    )
    names.set(node.id, name)
  }
  return name
}

const byStep = new Map<string, number>()
let at = profile.startTime
let busy = 0
for (let i = 0; i < profile.samples.length; i++) {
  at += profile.timeDeltas[i] ?? 0
  if (at < window.from || at > window.to) continue
  const leaf = nodes.get(profile.samples[i]!)!
  if (leaf.callFrame.functionName === '(idle)') continue
  const ms = (profile.timeDeltas[i] ?? 0) / 1000
  busy += ms
  const stack: string[] = []
  for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id))
    stack.push(nameOf(nodes.get(id)!))
  const step =
    steps.find(([, code]) => stack.some((frame) => code.test(frame)))?.[0] ?? 'event loop, timers, streams'
  byStep.set(step, (byStep.get(step) ?? 0) + ms)
}
console.log(
  `busy ${busy.toFixed(0)} ms in the window: ${(busy / payers).toFixed(2)} ms per payment (${payers})`,
)
for (const [step, ms] of [...byStep].sort((a, b) => b[1] - a[1]))
  console.log(`${(ms / payers).toFixed(2).padStart(6)} ms  ${step}`)
