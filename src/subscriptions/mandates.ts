import { createSignerRegistry } from '../actions/registry.js'
import { routeAction } from '../actions/route.js'
import type {
  GrantedMandate,
  InspectedMandate,
  MandatePolicy,
  MandateStatus,
  Signer,
  SignerRequest,
  StoredMandate,
} from '../actions/types.js'
import { PayError } from '../errors/PayError.js'
import { checkMandate } from './mandate.js'

/** Every mandate among the approved actions, bounded by its terms with what else the option may move. */
const checkMandates: MandatePolicy['check'] = (approved, context) => {
  const { account, amount, subscription } = context
  let counted = (context.stillMandated ?? 0n) + (subscription ? context.oneTime : 0n)
  for (const { request, inspection } of approved) {
    const { mandate } = inspection
    if (!mandate) continue
    checkMandate(mandate, {
      option: { account, amount, expiresAt: context.expiresAt ?? 0, subscription },
      chainId: request.chainId,
      signer: inspection.account,
      now: context.now ?? Math.floor(Date.now() / 1000),
      alsoCounted: counted,
    })
    counted += mandate.amount
  }
}

/** A mandate's status from its signer's node; without one, live until its expiration. */
async function statusOf(
  signer: Signer,
  request: SignerRequest,
  result: string,
  mandate: Pick<InspectedMandate, 'expiration'>,
): Promise<MandateStatus> {
  const read = await signer.mandateStatus?.(request, result).catch(() => undefined)
  const { expiration } = mandate
  const now = Math.floor(Date.now() / 1000)
  return read ?? (expiration !== undefined && expiration > 0 && now > expiration ? 'expired' : 'live')
}

/**
 * Where the wallet keeps the mandates it granted (its exposure store): `save` replaces a mandate of
 * the same id. A wallet app persists it (IndexedDB, its own database); `memoryMandateStore()` is for
 * tests and short sessions.
 */
export interface MandateStore {
  save(mandate: GrantedMandate): void | Promise<void>
  list(): readonly GrantedMandate[] | Promise<readonly GrantedMandate[]>
}

export function memoryMandateStore(): MandateStore {
  const byId = new Map<string, GrantedMandate>()
  return {
    save: (mandate) => void byId.set(mandate.id, mandate),
    list: () => [...byId.values()],
  }
}

/** A granted mandate with what the wallet's own node says of it now. */
export interface MandateView extends GrantedMandate {
  status: MandateStatus
  /** What it still counts in the wallet's exposure, minor units: the whole allowance while `live`, else 0. */
  counted: bigint
}

/**
 * The wallet's mandates: hand it to the flow or the pay client as `mandates` (then their guard signs
 * mandates within their terms and records each one here), and list or revoke what was granted.
 */
export interface Mandates extends MandatePolicy {
  /** Every mandate in the store, each with its status read from its signer's node (docs/exposure.md). */
  listMandates(): Promise<MandateView[]>
  /**
   * Sends the on-chain revoke of a mandate through its signer (Permit2 `approve(token, spender, 0, 0)`,
   * SPL `Revoke`), records the revoking transaction in the store and resolves with its id.
   */
  revokeMandate(id: string, options?: { signal?: AbortSignal }): Promise<string>
}

export function toInspected({ amount, ...rest }: StoredMandate): InspectedMandate {
  return { ...rest, amount: BigInt(amount) }
}

export interface MandatesOptions {
  /** The signers that grant and revoke (the flow's). */
  signers: readonly Signer[]
  /** Default: in memory, gone with the page. */
  store?: MandateStore
}

/**
 * The wallet's mandates over its store and signers. A mandate whose signer cannot read its node counts
 * as live until its expiration (SPL delegations have none: live until proved otherwise).
 */
export function createMandates({ signers, store = memoryMandateStore() }: MandatesOptions): Mandates {
  const registry = createSignerRegistry(signers)
  const route = (granted: GrantedMandate) => routeAction(registry, granted.action, 0, granted.terms)
  return {
    check: checkMandates,
    stillAllowed: async (signer, request, result, mandate) =>
      (await statusOf(signer, request, result, mandate)) === 'live' ? mandate.amount : 0n,
    record: ({ paymentId, option, action, index, result, mandate }) =>
      store.save({
        id: `${paymentId}:${index}`,
        paymentId,
        optionId: option.id,
        // The flow records only what the guard checked against these terms.
        terms: option.subscription!,
        mandate: { ...mandate, amount: mandate.amount.toString() },
        action,
        result,
        grantedAt: Math.floor(Date.now() / 1000),
      }),
    async listMandates() {
      return Promise.all(
        (await store.list()).map(async (granted): Promise<MandateView> => {
          const { signer, request } = route(granted)
          const status = await statusOf(signer, request, granted.result, granted.mandate)
          return { ...granted, status, counted: status === 'live' ? BigInt(granted.mandate.amount) : 0n }
        }),
      )
    },
    async revokeMandate(id, options = {}) {
      const granted = (await store.list()).find((mandate) => mandate.id === id)
      if (!granted) {
        throw new PayError({ code: 'invalid_action', message: 'No mandate with this id.', context: { id } })
      }
      const { signer } = route(granted)
      if (!signer.revokeMandate) {
        throw new PayError({
          code: 'unsupported_method',
          message: `The ${signer.namespace} signer cannot revoke a mandate (it needs its own node).`,
          context: { id, namespace: signer.namespace },
        })
      }
      const revokedBy = await signer.revokeMandate(toInspected(granted.mandate), options)
      await store.save({ ...granted, revokedBy })
      return revokedBy
    },
  }
}
