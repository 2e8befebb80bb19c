/**
 * The test-mode driver: options look like live ones (real EIP-3009 typed data, real serialized Solana
 * transactions built with web3.js and spl-token) but nothing touches a chain. Test mode offers only
 * signature actions, never `eth_sendTransaction`: a wallet broadcasts that itself, which would move real
 * funds on a sandbox payment.
 */
import { createHash, randomBytes } from 'node:crypto'
import {
  createApproveCheckedInstruction,
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
} from '@solana/spl-token'
import { Keypair, PublicKey, Transaction } from '@solana/web3.js'
import { type Address, getAddress, keccak256, stringToHex } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { permit2AllowanceTypedData } from '../../../protocol/evm/permit2.js'
import { formatAccountId, parseAssetId, sameCaip } from '../../caip/caip.js'
import type { Action } from '../../contract/gateway.js'
import { paramsError } from '../errors.js'
import { defaultTestAssets } from '../payments/assets.js'
import { authorizationTypedData } from './evm/authorization.js'
import { type BuiltMessage, buildAction, resolveBuildActions } from './solana/build.js'
import { mintOf } from './solana/chain.js'
import type {
  AssetConfig,
  BuildContext,
  BuildResult,
  ChainDriver,
  ConfirmContext,
  ConfirmOutcome,
  MandateDraft,
  MandateQuoteContext,
  OptionDraft,
  QuoteContext,
  WalletAccount,
} from './types.js'

/** What test mode offers with no configuration, by chain (docs/architecture.md, section 4). */
const defaultAssetsByChain: Readonly<Record<string, readonly AssetConfig[]>> = defaultTestAssets.reduce(
  (byChain, a) => {
    const asset = { id: a.asset, symbol: a.symbol, name: a.name, decimals: a.decimals, usdRate: a.usdRate }
    byChain[a.chainId] = [...(byChain[a.chainId] ?? []), asset]
    return byChain
  },
  {} as Record<string, AssetConfig[]>,
)

function seed(label: string): Buffer {
  return createHash('sha256').update(`caipay test mode: ${label}`).digest()
}

/**
 * Fixed, publicly derivable keys: test mode never holds funds, and stable addresses keep sandbox payloads
 * reproducible across restarts and instances.
 */
export const testServiceKeys = {
  evmCollection: privateKeyToAccount(keccak256(seed('evm collection'))).address,
  solana: Keypair.fromSeed(seed('solana fee payer and collection owner')),
}

export interface SimulatedDriverOptions {
  caip2: string
  assets: readonly AssetConfig[]
  /** Seconds shown to the buyer as the expected time to a final status. */
  etaS?: number
  evmCollection?: Address
  solanaKey?: Keypair
}

export function createSimulatedDriver(options: SimulatedDriverOptions): ChainDriver {
  const namespace = options.caip2.split(':')[0]!
  const evmCollection = options.evmCollection ?? testServiceKeys.evmCollection
  const solanaKey = options.solanaKey ?? testServiceKeys.solana
  const etaS = options.etaS ?? (namespace === 'solana' ? 2 : options.caip2 === 'eip155:1' ? 15 : 4)

  async function quote(ctx: QuoteContext): Promise<OptionDraft[]> {
    if (namespace === 'eip155') return [evmTransferAuthorization(ctx, evmCollection, etaS)]
    if (namespace !== 'solana') return []
    const build = buildAction()
    const drafts: OptionDraft[] = [{ kind: 'transfer', actions: [build], etaS }]
    const evm = ctx.accounts.find((a) => a.namespace === 'eip155')
    // Spec rule 4: an EVM action ahead of a Solana one, so wallets exercise mixed-chain result ordering.
    if (evm) drafts.push({ kind: 'mixed', actions: [attestation(ctx, evm), build], etaS })
    return drafts
  }

  /**
   * A subscription's first period grants the mandate (test mode: no chain, so the Permit2 nonce is 0
   * and no ERC-20 approve is offered, which a wallet would broadcast).
   */
  async function quoteMandate(ctx: MandateQuoteContext): Promise<MandateDraft[]> {
    const total = ctx.tokenAmount * BigInt(ctx.mandate.totalPeriods)
    if (namespace === 'eip155') {
      const from = getAddress(ctx.account.address)
      const typedData = permit2AllowanceTypedData({
        chainId: Number(ctx.account.reference),
        token: getAddress(parseAssetId(ctx.asset.id).assetReference),
        amount: total,
        expiration: BigInt(ctx.mandate.endAt),
        nonce: 0n,
        spender: evmCollection,
        sigDeadline: BigInt(ctx.expiresAt),
      })
      const action: Action = {
        type: 'walletRpc',
        walletRpc: {
          chainId: ctx.account.chainId,
          method: 'eth_signTypedData_v4',
          params: JSON.stringify([from, JSON.stringify(typedData)]),
        },
      }
      return [
        {
          kind: 'permit2Mandate',
          etaS,
          actions: [action],
          state: { total: total.toString() },
          spender: formatAccountId(options.caip2, evmCollection),
        },
      ]
    }
    if (namespace !== 'solana') return []
    return [
      {
        kind: 'splDelegation',
        etaS,
        actions: [buildAction()],
        state: { total: total.toString() },
        spender: formatAccountId(options.caip2, solanaKey.publicKey.toBase58()),
      },
    ]
  }

  async function build(ctx: BuildContext, data: string): Promise<BuildResult> {
    const mandateTotal = (ctx.option.state as { total?: string } | null)?.total
    const { actions, built } = await resolveBuildActions({
      actions: ctx.option.actions,
      data,
      chainId: options.caip2,
      transfer: async () => ({
        transaction: solanaTransfer({
          owner: ctx.option.account.split(':')[2]!,
          asset: ctx.asset,
          amount: mandateTotal === undefined ? ctx.option.tokenAmount : BigInt(mandateTotal),
          service: solanaKey,
          approve: mandateTotal !== undefined,
        }),
        details: {},
      }),
    })
    return { actions, state: mandateTotal === undefined ? { built } : { built, total: mandateTotal } }
  }

  async function verify(ctx: ConfirmContext): Promise<void> {
    const built = (ctx.option.state as { built?: BuiltMessage[] } | null)?.built ?? []
    for (const { index, message } of built) {
      let signedMessage: Buffer | undefined
      try {
        signedMessage = Transaction.from(Buffer.from(ctx.results[index]!, 'base64')).serializeMessage()
      } catch {
        // A versioned (v0) transaction decodes in the form check but cannot be the legacy one built here.
      }
      // The wallet signs what the service built; a changed message is a different payment.
      if (!signedMessage?.equals(Buffer.from(message, 'base64'))) {
        throw paramsError(`results.${index}`, `results[${index}] is not the transaction the service built`)
      }
    }
  }

  async function confirm(ctx: ConfirmContext): Promise<ConfirmOutcome> {
    return { status: 'succeeded', txId: `test:${ctx.payment.id}` }
  }

  return {
    caip2: options.caip2,
    namespace,
    assets: options.assets,
    quote,
    quoteMandate,
    build,
    verify,
    confirm,
  }
}

function evmTransferAuthorization(ctx: QuoteContext, collection: Address, etaS: number): OptionDraft {
  const from = getAddress(ctx.account.address)
  const nonce = `0x${randomBytes(32).toString('hex')}` as const
  const typedData = authorizationTypedData({
    kind: 'TransferWithAuthorization',
    chainId: Number(ctx.account.reference),
    token: getAddress(parseAssetId(ctx.asset.id).assetReference),
    domain: ctx.asset.eip712 ?? { name: 'USD Coin', version: '2' },
    from,
    to: collection,
    value: ctx.tokenAmount,
    validAfter: 0n,
    validBefore: BigInt(ctx.expiresAt),
    nonce,
  })
  return {
    kind: 'eip3009',
    etaS,
    state: { nonce, validBefore: ctx.expiresAt },
    actions: [
      {
        type: 'walletRpc',
        walletRpc: {
          chainId: ctx.account.chainId,
          method: 'eth_signTypedData_v4',
          params: JSON.stringify([from, JSON.stringify(typedData)]),
        },
      },
    ],
  }
}

function attestation(ctx: QuoteContext, evm: WalletAccount): Action {
  const text = [
    `caipay payment ${ctx.payment.id}`,
    `I pay ${ctx.tokenAmount} minor units of ${ctx.asset.symbol} (${ctx.asset.id})`,
    `from ${ctx.account.id}`,
    `and control ${evm.id}.`,
  ].join('\n')
  return {
    type: 'walletRpc',
    walletRpc: {
      chainId: evm.chainId,
      method: 'personal_sign',
      params: JSON.stringify([stringToHex(text), getAddress(evm.address)]),
    },
  }
}

/**
 * SPL `transferChecked` of the exact amount from the buyer's associated token account to the service's,
 * the service paying the fee and signing first; with `approve`, an `ApproveChecked` of `amount` to the
 * service key as delegate instead (a subscription's mandate). The blockhash is random: test mode has no RPC.
 */
function solanaTransfer(input: {
  owner: string
  asset: AssetConfig
  amount: bigint
  service: Keypair
  approve?: boolean
}): Transaction {
  const owner = new PublicKey(input.owner)
  const mint = mintOf(input.asset)
  const source = getAssociatedTokenAddressSync(mint, owner, true)
  const destination = getAssociatedTokenAddressSync(mint, input.service.publicKey, true)
  const transaction = new Transaction({
    feePayer: input.service.publicKey,
    recentBlockhash: new PublicKey(randomBytes(32)).toBase58(),
  })
  transaction.add(
    input.approve
      ? createApproveCheckedInstruction(
          source,
          mint,
          input.service.publicKey,
          owner,
          input.amount,
          input.asset.decimals,
        )
      : createTransferCheckedInstruction(
          source,
          mint,
          destination,
          owner,
          input.amount,
          input.asset.decimals,
        ),
  )
  transaction.partialSign(input.service)
  return transaction
}

/** Simulated drivers for test mode: the default chains plus every configured chain. */
export function testModeDrivers(
  configured: Readonly<Record<string, readonly AssetConfig[]>> = {},
): ChainDriver[] {
  const chains = new Map<string, AssetConfig[]>()
  for (const [caip2, assets] of Object.entries(defaultAssetsByChain)) chains.set(caip2, [...assets])
  for (const [caip2, assets] of Object.entries(configured)) {
    const known = chains.get(caip2) ?? []
    const extra = assets.filter((a) => !known.some((k) => sameCaip(k.id, a.id)))
    chains.set(caip2, [...known, ...extra])
  }
  return [...chains].map(([caip2, assets]) => createSimulatedDriver({ caip2, assets }))
}
