import { erc20Abi, parseAbiItem } from 'viem'
import { holderOf } from '../../ledger/entries.js'
import { reconcile } from '../../ledger/reconcile.js'
import { creditTopUps, scannedTo } from '../../ledger/topUps.js'
import type { Db } from '../../store/db.js'
import type { EvmAsset, EvmChain } from './chain.js'

const transferEvent = parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 value)')

/** Blocks per getLogs call: what public nodes accept. */
const logRange = 10_000n

/** The newest block the chain's confirmations make final for the ledger. */
export async function confirmedBlock(chain: EvmChain): Promise<bigint> {
  const latest = await chain.publicClient.getBlockNumber({ cacheTime: 0 })
  const confirmed = latest - BigInt(Math.max(0, chain.confirmations - 1))
  return confirmed < 0n ? 0n : confirmed
}

/**
 * Reads the ERC-20 Transfer logs into the collection address from where the last scan stopped up to
 * `toBlock` (a confirmed block), each range from a node that has its last block (a node behind would
 * answer it short and the cursor would pass the rest), and credits those no transaction of the service
 * explains (every relay, settlement and refund is recorded in evm_transactions before it is sent) as
 * top-ups. The first scan of an address starts at block 0: docs/live-mode.md says how an operator starts
 * later.
 */
export async function scanEvmTopUps(
  db: Db,
  chain: EvmChain,
  asset: EvmAsset,
  toBlock?: bigint,
): Promise<void> {
  const holder = holderOf(chain.caip2, chain.executor.address)
  const to = toBlock ?? (await confirmedBlock(chain))
  let from = ((await scannedTo(db, holder, asset.id)) ?? -1n) + 1n
  while (from <= to) {
    const end = from + logRange - 1n < to ? from + logRange - 1n : to
    const logs = await chain.nodes.getLogs({
      address: asset.token,
      event: transferEvent,
      args: { to: chain.executor.address },
      fromBlock: from,
      toBlock: end,
    })
    const hashes = [...new Set(logs.map((log) => log.transactionHash!.toLowerCase()))]
    const ours =
      hashes.length === 0
        ? new Set<string>()
        : new Set(
            (
              await db
                .selectFrom('evm_transactions')
                .select('hash')
                .where('chain_id', '=', chain.caip2)
                .where((eb) => eb.fn('lower', ['hash']), 'in', hashes)
                .execute()
            ).map((row) => row.hash.toLowerCase()),
          )
    const transfers = logs
      .filter((log) => !ours.has(log.transactionHash!.toLowerCase()))
      .map((log) => ({ txId: `${log.transactionHash}:${log.logIndex}`, value: log.args.value ?? 0n }))
    await creditTopUps(db, { mode: 'live', holder, asset: asset.id, block: end, transfers, now: new Date() })
    from = end + 1n
  }
}

/**
 * Reconciles each configured asset at the collection address: top-ups read up to a confirmed block, then
 * the token balance at that same block compared with the ledger (ledger/reconcile.ts).
 */
export async function reconcileEvmChain(
  db: Db,
  chain: EvmChain,
  log?: { error(obj: object, msg: string): void },
): Promise<void> {
  const block = await confirmedBlock(chain)
  for (const asset of chain.assets) {
    await scanEvmTopUps(db, chain, asset, block)
    const balance = await chain.publicClient.readContract({
      address: asset.token,
      abi: erc20Abi,
      functionName: 'balanceOf',
      args: [chain.executor.address],
      blockNumber: block,
    })
    await reconcile(db, {
      mode: 'live',
      holder: holderOf(chain.caip2, chain.executor.address),
      asset: asset.id,
      block,
      chainBalance: balance,
      now: new Date(),
      ...(log ? { log } : {}),
    })
  }
}
