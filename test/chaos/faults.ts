import { type Hex, parseGwei } from 'viem'
import type { AnvilControl } from '../anvil.js'
import type { Fault, FaultProxy } from '../rpcFaults.js'
import type { SolanaValidator } from '../solana/index.js'

/**
 * The fault classes of issue 17, each as a window: `apply` injects the fault, keeps it for `windowMs`
 * and takes it away again (a fault that is an event, like a reorg or an expired blockhash, happens once
 * in its window). The chaos suite plays them in a seeded order while payments run.
 */
export interface ChaosTargets {
  /** In front of Anvil: what every caipay process uses as the EVM RPC. */
  evm: FaultProxy
  /** In front of the Solana harness. */
  solana: FaultProxy
  anvil: AnvilControl
  /** Anvil's own JSON-RPC (mining control the proxy does not pass through). */
  anvilRpc: (method: string, params?: unknown[]) => Promise<unknown>
  validator: SolanaValidator
}

export interface ChaosFault {
  name: string
  chain: 'evm' | 'solana'
  apply(targets: ChaosTargets, windowMs: number): Promise<void>
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** `fault` on `method` of one proxy for the window (or its first `times` calls in it). */
function proxied(
  chain: 'evm' | 'solana',
  name: string,
  method: string,
  fault: Fault,
  times?: number,
): ChaosFault {
  return {
    name,
    chain,
    async apply(targets, windowMs) {
      const proxy = targets[chain]
      proxy.inject(method, fault, times === undefined ? {} : { times })
      await sleep(windowMs)
      proxy.clear(method)
    },
  }
}

/** `method` answers nothing for the window; then the held calls' connections are cut (client timeouts). */
function unanswered(chain: 'evm' | 'solana', name: string, method: string): ChaosFault {
  return {
    name,
    chain,
    async apply(targets, windowMs) {
      const proxy = targets[chain]
      proxy.hold(method)
      await sleep(windowMs)
      proxy.clear(method)
      proxy.cutHeld()
    },
  }
}

const rpcError = { kind: 'error', code: -32000, message: 'header not found' } as const
const solanaBehind = { kind: 'error', code: -32005, message: 'Node is behind by 42 slots' } as const

export const chaosFaults: readonly ChaosFault[] = [
  proxied(
    'evm',
    'EVM send dropped after its hash was answered',
    'eth_sendRawTransaction',
    { kind: 'drop' },
    1,
  ),
  proxied('evm', 'EVM receipts withheld', 'eth_getTransactionReceipt', { kind: 'withhold' }),
  proxied('evm', 'EVM receipts delayed 1.5 s', 'eth_getTransactionReceipt', { kind: 'delay', ms: 1_500 }),
  proxied('evm', 'EVM RPC errors on eth_call', 'eth_call', rpcError, 3),
  unanswered('evm', 'EVM RPC timeouts on receipts', 'eth_getTransactionReceipt'),
  proxied('evm', 'EVM malformed JSON on receipts', 'eth_getTransactionReceipt', { kind: 'malformed' }, 2),
  proxied('evm', 'EVM 429 on nonce reads', 'eth_getTransactionCount', { kind: 'rateLimited' }, 3),
  {
    name: 'EVM base fee spike past the relay fees (stuck relay, fee bump)',
    chain: 'evm',
    async apply(targets, windowMs) {
      // A window like every other fault: left to decay, the spike prices a buyer's own approve out for
      // ~30 blocks (Anvil drops it; the wallet sends it again until it fits), longer than a run lasts.
      const latest = (await targets.anvilRpc('eth_getBlockByNumber', ['latest', false])) as {
        baseFeePerGas: Hex
      }
      await targets.anvil.setNextBaseFee(parseGwei('60'))
      await sleep(windowMs)
      await targets.anvil.setNextBaseFee(BigInt(latest.baseFeePerGas))
    },
  },
  {
    name: 'EVM mining paused',
    chain: 'evm',
    async apply(targets, windowMs) {
      await targets.anvilRpc('evm_setIntervalMining', [0])
      try {
        await sleep(windowMs)
      } finally {
        await targets.anvilRpc('evm_setIntervalMining', [1])
      }
    },
  },
  {
    name: 'EVM shallow reorg (1 block, under the 2 confirmations)',
    chain: 'evm',
    async apply(targets, windowMs) {
      // As on a real node, the orphaned block's transactions go back to the pool (Anvil forgets them):
      // a wallet waiting for its own approve sees it vanish for a block, then land again. Mining is
      // paused meanwhile so the block read is the block replaced.
      await targets.anvilRpc('evm_setIntervalMining', [0])
      try {
        const block = (await targets.anvilRpc('eth_getBlockByNumber', ['latest', false])) as {
          transactions: string[]
        }
        const raws = await Promise.all(
          block.transactions.map((hash) => targets.anvilRpc('eth_getRawTransactionByHash', [hash])),
        )
        await targets.anvil.reorg(1)
        // A transaction whose nonce the new history already used is gone for good, as on any node.
        await Promise.all(
          raws.map((raw) => targets.anvilRpc('eth_sendRawTransaction', [raw]).catch(() => {})),
        )
      } finally {
        await targets.anvilRpc('evm_setIntervalMining', [1])
      }
      await sleep(windowMs)
    },
  },
  proxied(
    'solana',
    'Solana send dropped after its signature was answered',
    'sendTransaction',
    { kind: 'drop' },
    1,
  ),
  proxied('solana', 'Solana signature statuses withheld', 'getSignatureStatuses', { kind: 'withhold' }),
  proxied('solana', 'Solana signature statuses delayed 1.5 s', 'getSignatureStatuses', {
    kind: 'delay',
    ms: 1_500,
  }),
  proxied('solana', 'Solana RPC errors on getLatestBlockhash', 'getLatestBlockhash', solanaBehind, 2),
  unanswered('solana', 'Solana RPC timeouts on signature statuses', 'getSignatureStatuses'),
  proxied(
    'solana',
    'Solana malformed JSON on signature statuses',
    'getSignatureStatuses',
    { kind: 'malformed' },
    2,
  ),
  proxied('solana', 'Solana 429 on signature statuses', 'getSignatureStatuses', { kind: 'rateLimited' }, 3),
  {
    name: 'Solana blockhash expired',
    chain: 'solana',
    async apply(targets, windowMs) {
      await targets.validator.expireBlockhash()
      await sleep(windowMs)
    },
  },
]
