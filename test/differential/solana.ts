/**
 * The Solana differential generator: mutants of an honest payment transaction, judged by the wallet's
 * signing guard (the real solanaSigner decoder and the core guard) and executed in LiteSVM (the real
 * SVM with SPL Token). Property: a mutant that LiteSVM executes with an effect on the wallet beyond
 * what the option covers (tokens out over the amount or over what the decoder read, lamports over the
 * fee bound, a delegate, owner or close authority set, the wallet account reassigned) was refused.
 */

import { address, getTransactionDecoder, lamports } from '@solana/kit'
import {
  ACCOUNT_SIZE,
  AccountLayout,
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
  MINT_SIZE,
  MintLayout,
  TOKEN_2022_PROGRAM_ID,
  TOKEN_PROGRAM_ID,
} from '@solana/spl-token'
import {
  ComputeBudgetProgram,
  Keypair,
  PublicKey,
  SystemProgram,
  TransactionInstruction,
  TransactionMessage,
  VersionedTransaction,
} from '@solana/web3.js'
import { LiteSVM } from 'litesvm'
import { solanaSigner } from '../../adapters/solana/index.js'
import { decodeSolanaTransaction, maxFeeLamports, precompileProgramIds } from '../../protocol/solana/index.js'
import { guardActions } from '../../src/actions/guard.js'
import { createSignerRegistry } from '../../src/actions/registry.js'
import { routeActions } from '../../src/actions/route.js'
import { createReviewer, type PaymentReview } from '../../src/review/index.js'
import { type Random, seededRandom } from './random.js'

const chain = 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp'
const amount = 1_000_000n
const decimals = 6
const feeLimit = 1_000_000n

export interface SolanaVerdict {
  index: number
  mutations: string[]
  accepted: boolean
  refusal?: string
  executed: boolean
  /** What LiteSVM did to the wallet beyond the option, if anything. */
  harm: string[]
}

export interface SolanaCampaign {
  seed: number
  verdicts: SolanaVerdict[]
  /** Accepted mutants with harm: each one is a guard bug. */
  violations: SolanaVerdict[]
}

interface World {
  svm: LiteSVM
  wallet: Keypair
  service: Keypair
  attacker: Keypair
  mints: Record<'token' | 'token2022', PublicKey>
}

function keypair(random: Random): Keypair {
  return Keypair.fromSeed(Uint8Array.from({ length: 32 }, () => random.int(256)))
}

function setAccount(svm: LiteSVM, key: PublicKey, owner: PublicKey, data: Uint8Array): void {
  svm.setAccount({
    address: address(key.toBase58()),
    data,
    executable: false,
    lamports: lamports(svm.minimumBalanceForRentExemption(BigInt(data.length))),
    programAddress: address(owner.toBase58()),
    space: BigInt(data.length),
  })
}

function world(random: Random): World {
  const svm = new LiteSVM()
  const [wallet, service, attacker] = [keypair(random), keypair(random), keypair(random)]
  for (const key of [wallet, service, attacker]) {
    svm.airdrop(address(key.publicKey.toBase58()), lamports(100_000_000_000n))
  }
  const mints = { token: keypair(random).publicKey, token2022: keypair(random).publicKey }
  for (const [mint, program] of [
    [mints.token, TOKEN_PROGRAM_ID],
    [mints.token2022, TOKEN_2022_PROGRAM_ID],
  ] as const) {
    const data = new Uint8Array(MINT_SIZE)
    MintLayout.encode(
      {
        mintAuthorityOption: 1,
        mintAuthority: service.publicKey,
        supply: 10n ** 15n,
        decimals,
        isInitialized: true,
        freezeAuthorityOption: 0,
        freezeAuthority: PublicKey.default,
      },
      data,
    )
    setAccount(svm, mint, program, data)
    for (const owner of [wallet, service, attacker]) {
      const account = new Uint8Array(ACCOUNT_SIZE)
      AccountLayout.encode(
        {
          mint,
          owner: owner.publicKey,
          amount: 10n ** 12n,
          delegateOption: 0,
          delegate: PublicKey.default,
          state: 1,
          isNativeOption: 0,
          isNative: 0n,
          delegatedAmount: 0n,
          closeAuthorityOption: 0,
          closeAuthority: PublicKey.default,
        },
        account,
      )
      setAccount(svm, getAssociatedTokenAddressSync(mint, owner.publicKey, false, program), program, account)
    }
  }
  return { svm, wallet, service, attacker, mints }
}

interface Draft {
  feePayer: Keypair
  program: PublicKey
  mint: PublicKey
  instructions: TransactionInstruction[]
  version: 'legacy' | 0
}

function honest(w: World, random: Random): Draft {
  const token2022 = random.int(4) === 0
  const program = token2022 ? TOKEN_2022_PROGRAM_ID : TOKEN_PROGRAM_ID
  const mint = token2022 ? w.mints.token2022 : w.mints.token
  const transfer = createTransferCheckedInstruction(
    getAssociatedTokenAddressSync(mint, w.wallet.publicKey, false, program),
    mint,
    getAssociatedTokenAddressSync(mint, w.service.publicKey, false, program),
    w.wallet.publicKey,
    amount,
    decimals,
    [],
    program,
  )
  return {
    feePayer: random.int(2) === 0 ? w.wallet : w.service,
    program,
    mint,
    instructions: [
      ComputeBudgetProgram.setComputeUnitLimit({ units: 200_000 }),
      ComputeBudgetProgram.setComputeUnitPrice({ microLamports: 1_000n }),
      transfer,
    ],
    version: random.int(2) === 0 ? 'legacy' : 0,
  }
}

const withData = (ix: TransactionInstruction, data: Uint8Array) =>
  new TransactionInstruction({
    programId: ix.programId,
    keys: ix.keys.map((k) => ({ ...k })),
    data: Buffer.from(data),
  })

function bytes(random: Random, length: number): Uint8Array {
  return Uint8Array.from({ length }, () => (random.int(3) === 0 ? 0 : random.int(256)))
}

/** One mutation, applied to the draft in place; returns its description. */
function mutate(d: Draft, w: World, random: Random): string {
  const ixs = d.instructions
  const at = random.int(ixs.length)
  const ix = ixs[at]!
  const source = getAssociatedTokenAddressSync(d.mint, w.wallet.publicKey, false, d.program)
  const walletKey = w.wallet.publicKey
  switch (random.int(13)) {
    case 0: {
      const extra = bytes(random, 1 + random.int(8))
      ixs[at] = withData(ix, Uint8Array.from([...ix.data, ...extra]))
      return `trailing ${extra.length} bytes on #${at}`
    }
    case 1: {
      const cut = 1 + random.int(Math.max(1, ix.data.length))
      ixs[at] = withData(ix, ix.data.subarray(0, Math.max(0, ix.data.length - cut)))
      return `truncate #${at} by ${cut}`
    }
    case 2: {
      const data = Uint8Array.from(ix.data.length ? ix.data : [0])
      data[0] = random.int(32)
      ixs[at] = withData(ix, data)
      return `discriminator ${data[0]} on #${at}`
    }
    case 3: {
      if (ix.keys.length < 2) return 'no-op'
      const [i, j] = [random.int(ix.keys.length), random.int(ix.keys.length)]
      const keys = ix.keys.map((k) => ({ ...k }))
      ;[keys[i], keys[j]] = [keys[j]!, keys[i]!]
      ixs[at] = new TransactionInstruction({ programId: ix.programId, keys, data: ix.data })
      return `swap accounts ${i},${j} of #${at}`
    }
    case 4: {
      if (ix.keys.length === 0) return 'no-op'
      const i = random.int(ix.keys.length)
      const keys = ix.keys.map((k) => ({ ...k }))
      keys[i]!.isWritable = !keys[i]!.isWritable
      ixs[at] = new TransactionInstruction({ programId: ix.programId, keys, data: ix.data })
      return `flip writable ${i} of #${at}`
    }
    case 5: {
      const program = precompileProgramIds[random.int(precompileProgramIds.length)]!
      const count = random.int(256)
      ixs.splice(
        random.int(ixs.length + 1),
        0,
        withData(
          new TransactionInstruction({ programId: new PublicKey(program), keys: [], data: Buffer.alloc(0) }),
          Uint8Array.from([count, ...bytes(random, random.int(4))]),
        ),
      )
      return `precompile ${program.slice(0, 8)} declaring ${count}`
    }
    case 6: {
      const nonce = SystemProgram.nonceAdvance({
        noncePubkey: w.attacker.publicKey,
        authorizedPubkey: random.int(2) ? walletKey : w.service.publicKey,
      })
      ixs.unshift(withData(nonce, Uint8Array.from([...nonce.data, ...bytes(random, random.int(3))])))
      return 'advance nonce first'
    }
    case 7: {
      // SPL instructions the wallet's signature would authorise: Transfer, Approve, SetAuthority, CloseAccount, Burn.
      const tag = [3, 4, 6, 9, 8][random.int(5)]!
      const keys =
        tag === 9
          ? [source, w.attacker.publicKey, walletKey]
          : tag === 8
            ? [source, d.mint, walletKey]
            : tag === 6
              ? [source, walletKey]
              : [
                  source,
                  getAssociatedTokenAddressSync(d.mint, w.attacker.publicKey, false, d.program),
                  walletKey,
                ]
      const data =
        tag === 6
          ? Uint8Array.from([6, random.int(4), 1, ...w.attacker.publicKey.toBytes()])
          : Uint8Array.from([tag, ...u64(BigInt(random.int(2)) ? 10n ** 9n : 1n)])
      ixs.splice(
        random.int(ixs.length + 1),
        0,
        new TransactionInstruction({
          programId: d.program,
          keys: keys.map((pubkey, i) => ({
            pubkey,
            isSigner: pubkey.equals(walletKey),
            isWritable: i === 0 || i === 1,
          })),
          data: Buffer.from(data),
        }),
      )
      return `spl tag ${tag} by the wallet`
    }
    case 8: {
      const ixTransfer = SystemProgram.transfer({
        fromPubkey: walletKey,
        toPubkey: w.attacker.publicKey,
        lamports: 1 + random.int(10 ** 9),
      })
      ixs.splice(random.int(ixs.length + 1), 0, ixTransfer)
      return 'system transfer from the wallet'
    }
    case 9: {
      const transfer = ixs.findIndex((x) => x.programId.equals(d.program))
      if (transfer < 0) return 'no-op'
      const data = Uint8Array.from(ixs[transfer]!.data)
      if (data.length >= 9) data.set(u64(BigInt(random.int(2)) ? amount + 1n : 10n ** 12n), 1)
      ixs[transfer] = withData(ixs[transfer]!, data)
      return 'transfer amount'
    }
    case 10: {
      const budget = ixs.filter((x) => x.programId.equals(ComputeBudgetProgram.programId))
      if (!budget.length) return 'no-op'
      ixs.splice(random.int(ixs.length + 1), 0, budget[random.int(budget.length)]!)
      return 'repeat a compute-budget instruction'
    }
    case 11: {
      const price = [10n ** 6n, 10n ** 9n, 5n * 10n ** 9n, 2n ** 64n - 1n][random.int(4)]!
      const i = ixs.findIndex((x) => x.programId.equals(ComputeBudgetProgram.programId) && x.data[0] === 3)
      const ixPrice = withData(
        ComputeBudgetProgram.setComputeUnitPrice({ microLamports: 0n }),
        Uint8Array.from([3, ...u64(price)]),
      )
      if (i >= 0) ixs[i] = ixPrice
      else ixs.unshift(ixPrice)
      return `unit price ${price}`
    }
    default: {
      const i = ixs.findIndex((x) => x.programId.equals(ComputeBudgetProgram.programId) && x.data[0] === 2)
      if (i >= 0) ixs.splice(i, 1)
      return 'no unit limit'
    }
  }
}

function u64(value: bigint): Uint8Array {
  const out = new Uint8Array(8)
  new DataView(out.buffer).setBigUint64(0, value & (2n ** 64n - 1n), true)
  return out
}

interface Observed {
  lamports: bigint
  tokens: bigint
  authorities: string
  owner: string
}

function observe(w: World, d: Draft): Observed {
  const key = address(w.wallet.publicKey.toBase58())
  const ata = getAssociatedTokenAddressSync(d.mint, w.wallet.publicKey, false, d.program)
  const account = w.svm.getAccount(address(ata.toBase58()))
  const system = w.svm.getAccount(key)
  if (!account.exists)
    return { lamports: w.svm.getBalance(key) ?? 0n, tokens: 0n, authorities: 'closed', owner: '' }
  const decoded = AccountLayout.decode(Uint8Array.from(account.data).subarray(0, ACCOUNT_SIZE))
  return {
    lamports: w.svm.getBalance(key) ?? 0n,
    tokens: decoded.amount,
    authorities: [
      decoded.owner.toBase58(),
      decoded.delegateOption,
      decoded.closeAuthorityOption,
      decoded.state,
    ].join('/'),
    owner: system.exists ? String(system.programAddress) : '',
  }
}

const kitDecoder = getTransactionDecoder()

/** Runs `count` mutants from `seed` (mutant i is reproducible from (seed, i) alone). */
export async function runSolanaCampaign(
  seed: number,
  count: number,
  only?: readonly number[],
): Promise<SolanaCampaign> {
  const w = world(seededRandom(seed))
  const signers = (allowFeePayer: boolean) =>
    createSignerRegistry([
      solanaSigner({ keypair: w.wallet, chains: [chain], allowFeePayer, maxFeeLamports: feeLimit }),
    ])
  const verdicts: SolanaVerdict[] = []
  for (let index = 0; index < count; index++) {
    if (only && !only.includes(index)) continue
    const random = seededRandom(seed * 1_000_003 + index)
    const d = honest(w, random)
    const mutations: string[] = []
    for (let n = 1 + random.int(3); n > 0; n--) mutations.push(mutate(d, w, random))
    const message = new TransactionMessage({
      payerKey: d.feePayer.publicKey,
      recentBlockhash: w.svm.latestBlockhash(),
      instructions: d.instructions,
    })
    let tx: VersionedTransaction
    try {
      tx = new VersionedTransaction(
        d.version === 0 ? message.compileToV0Message() : message.compileToLegacyMessage(),
      )
    } catch {
      continue // web3.js cannot even compile it (e.g. over the size limit)
    }
    const base64 = Buffer.from(tx.serialize()).toString('base64')
    const verdict: SolanaVerdict = { index, mutations, accepted: false, executed: false, harm: [] }
    let inspected = 0n
    let review: PaymentReview | undefined
    try {
      const routed = routeActions(signers(d.feePayer === w.wallet), [
        {
          type: 'walletRpc',
          walletRpc: {
            chainId: chain,
            method: 'solana_signTransaction',
            params: JSON.stringify([{ transaction: base64 }]),
          },
        },
      ])
      const approved = await guardActions(routed, {
        accounts: [`${chain}:${w.wallet.publicKey.toBase58()}`],
        account: `${chain}:${w.wallet.publicKey.toBase58()}`,
        amount: {
          unit: `caip19/${chain}/token:${d.mint.toBase58()}`,
          value: amount.toString(),
          display: { assetName: 'USD Coin', assetSymbol: 'USDC', decimals },
        },
      })
      verdict.accepted = true
      const inspection = await routed[0]!.signer.inspect!(routed[0]!.request)
      inspected = inspection.transfers.reduce((sum, t) => sum + t.amount, 0n)
      review = await createReviewer()(approved, { optionId: `mutant ${index}` })
    } catch (error) {
      verdict.refusal = (error as { code?: string }).code ?? String(error)
    }
    const required = tx.message.staticAccountKeys.slice(0, tx.message.header.numRequiredSignatures)
    const keys = [w.wallet, w.service, w.attacker].filter((k) => required.some((r) => r.equals(k.publicKey)))
    if (keys.length !== required.length) {
      verdicts.push(verdict)
      continue
    }
    tx.sign(keys)
    const before = observe(w, d)
    w.svm.sendTransaction(kitDecoder.decode(tx.serialize()) as never)
    const after = observe(w, d)
    verdict.executed = true
    const fee = d.feePayer === w.wallet ? maxFeeLamports(decodeSolanaTransaction(base64)) : 0n
    const covered = fee < feeLimit ? fee : feeLimit
    if (before.tokens - after.tokens > amount) verdict.harm.push(`tokens out ${before.tokens - after.tokens}`)
    if (verdict.accepted && before.tokens - after.tokens > inspected)
      verdict.harm.push('tokens out beyond what the decoder read')
    if (before.lamports - after.lamports > (verdict.accepted ? covered : feeLimit)) {
      verdict.harm.push(`lamports out ${before.lamports - after.lamports}`)
    }
    // The review (issue 43): what left the wallet is what it showed, fees at most its bound.
    if (review) {
      const shown = review.actions.flatMap((a) => a.moves).reduce((sum, m) => sum + m.amount, 0n)
      const fees = review.maxFees.reduce((sum, f) => sum + f.max, 0n)
      // A transaction lands whole or not at all: tokens that left left as shown.
      const out = before.tokens - after.tokens
      if (out !== 0n && out !== shown) verdict.harm.push(`tokens out ${out}, the review shows ${shown}`)
      if (before.lamports - after.lamports > fees)
        verdict.harm.push(
          `lamports out ${before.lamports - after.lamports} beyond the review's fee bound ${fees}`,
        )
    }
    if (before.authorities !== after.authorities)
      verdict.harm.push(`token account ${before.authorities} -> ${after.authorities}`)
    if (before.owner !== after.owner) verdict.harm.push('wallet account reassigned')
    verdicts.push(verdict)
    w.svm.expireBlockhash()
  }
  return { seed, verdicts, violations: verdicts.filter((v) => v.accepted && v.harm.length > 0) }
}
