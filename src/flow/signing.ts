import { type ApprovedOption, guardActions } from '../actions/guard.js'
import { resolveActions } from '../actions/resolve.js'
import { type RoutedAction, routeActions } from '../actions/route.js'
import { broadcastingMethods } from '../contract/walletMethods.js'
import { abortable } from '../errors/abort.js'
import { PayError } from '../errors/PayError.js'
import type { PaymentReview } from '../review/types.js'
import { guardContext, readExposure } from './exposure.js'
import { assertPullOption } from './options.js'
import { call, checkpoint, checkpointOrReport, enter, type FlowRun, transition, wrap } from './run.js'
import type { ActionEvent } from './types.js'

/** Resolves the selected option's `build` actions into what gets signed, then moves to `signing`. */
export async function fetchActions(run: FlowRun): Promise<void> {
  const option = run.data.option!
  // A resumed snapshot or a hand-built flow may hold one: nothing of a push option is ever signed.
  assertPullOption(option)
  const actions = await resolveActions(option.actions, async (data) => {
    const response = await call(run, (signal) =>
      run.config.gateway.fetchActions(run.paymentId, { optionId: option.id, data }, { signal }),
    )
    return response.actions
  })
  run.data.actions = actions
  run.data.results = []
  run.data.inFlight = null
  await enter(run, 'signing')
}

/**
 * Routes and guards every action (an option that cannot complete signs nothing) and describes what
 * the guard approved; emits `review` once per set of actions. No review with the guard off or no
 * `review` option.
 */
export async function reviewActions(
  run: FlowRun,
): Promise<{ routed: RoutedAction[]; approved?: ApprovedOption; review?: PaymentReview }> {
  const actions = run.data.actions!
  const signal = run.controller.signal
  const routed = routeActions(run.registry, actions, run.data.option!.subscription)
  const { guard, review: describe } = run.config
  if (guard === 'off') return { routed }
  const { counted, mandated, spent } = await abortable(readExposure(run, run.data.exposure), signal)
  if (spent) {
    throw new PayError({ code: 'action_rejected', message: 'An earlier signature paid this option.' })
  }
  const approved = await abortable(
    guardActions(routed, { ...guardContext(run), stillAuthorized: counted, stillMandated: mandated }),
    signal,
  )
  if (!describe) return { routed, approved }
  const review = await abortable(
    describe(approved, { optionId: run.data.option!.id, merchant: run.merchant }),
    signal,
  )
  if (run.reviewed !== actions) {
    run.reviewed = actions
    run.events.emit('review', review)
  }
  return { routed, approved, review }
}

/**
 * Reviews every action before the first is signed, asks `onReview` while some are left to sign, then
 * signs the ones without a recorded result, in order, and moves to `confirming`.
 */
export async function signActions(run: FlowRun): Promise<void> {
  const signal = run.controller.signal
  const { routed, approved, review } = await reviewActions(run)
  const { onReview } = run.config
  if (review && onReview && run.data.results.length < routed.length) {
    if (!(await abortable(Promise.resolve(onReview(review)), signal))) {
      throw new PayError({ code: 'user_rejected', message: 'The wallet refused the review.' })
    }
  }
  await reconcileInFlight(run, routed)

  const { results } = run.data
  for (let index = results.length; index < routed.length; index++) {
    const { signer, request } = routed[index]!
    const event = { index, count: routed.length, chainId: request.chainId, method: request.method }
    run.data.inFlight = index
    run.events.emit('action', { ...event, phase: 'start' })
    await checkpoint(run)
    let result: unknown
    try {
      result = await abortable(
        signer.request({ ...request, followedByMore: index < routed.length - 1, signal }),
        signal,
      )
    } catch (cause) {
      throw wrap(cause, 'signer_failed', 'The signer failed.', event)
    }
    if (typeof result !== 'string' || result.length === 0) {
      throw new PayError({
        code: 'signer_failed',
        message: 'The signer returned no result.',
        context: event,
      })
    }
    record(run, result, { ...event, phase: 'signed' })
    await checkpointOrReport(run)
    // A mandate the wallet could not keep in its store is never handed to the service: its failure
    // fails the flow before `confirm`, and the grant lapses unused (docs/subscriptions.md).
    const mandate = approved?.actions[index]?.inspection.mandate
    const { paymentId, data } = run
    if (mandate) {
      await run.config.mandates!.record({
        paymentId,
        option: data.option!,
        action: data.actions![index]!,
        index,
        result,
        mandate,
      })
    }
  }
  transition(run, 'confirming')
  await checkpointOrReport(run)
}

/** A resumed flow whose last snapshot shows an action with its signer but no result recorded. */
async function reconcileInFlight(run: FlowRun, routed: readonly RoutedAction[]): Promise<void> {
  const { inFlight, results } = run.data
  if (inFlight === null) return
  const entry = routed[inFlight]
  if (entry && inFlight === results.length) {
    const { chainId, method, params } = entry.request
    const facts = { index: inFlight, count: routed.length, chainId, method }
    if (run.config.reconcile) {
      const found = await abortable(
        run.config.reconcile({ index: inFlight, chainId, method, params }),
        run.controller.signal,
      )
      if (typeof found === 'string' && found.length > 0) record(run, found, { ...facts, phase: 'signed' })
    } else if (broadcastingMethods.includes(method)) {
      throw new PayError({
        code: 'action_in_doubt',
        message: 'An action may have been sent before the wallet stopped; it is not sent again.',
        context: facts,
      })
    }
  }
  run.data.inFlight = null
  await checkpoint(run)
}

function record(run: FlowRun, result: string, event: ActionEvent): void {
  // The result is in the snapshot before anything else happens, so a crash cannot lose it.
  run.data.results.push(result)
  run.data.inFlight = null
  run.events.emit('action', { ...event, result })
}
