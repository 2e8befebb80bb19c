import * as z from 'zod/mini'

/** What the hosted data-collection form posts to the service. */
export const CollectDataSubmitBody = z.strictObject({
  optionId: z.optional(z.string().check(z.maxLength(64))),
  fields: z.record(z.string().check(z.maxLength(64)), z.string().check(z.maxLength(1024))),
})
export type CollectDataSubmitBody = z.infer<typeof CollectDataSubmitBody>
