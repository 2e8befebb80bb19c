import { paramsError } from '../errors.js'

export interface CollectField {
  name: string
  title: string
  /** HTML input type. */
  input: 'text' | 'date'
  autocomplete: string
}

/** The fields the hosted form asks for, in display order. */
export const collectFields: readonly CollectField[] = [
  { name: 'fullName', title: 'Full name', input: 'text', autocomplete: 'name' },
  { name: 'dateOfBirth', title: 'Date of birth', input: 'date', autocomplete: 'bday' },
  { name: 'country', title: 'Country of residence', input: 'text', autocomplete: 'country' },
]

/** What `collectData.schema` carries: a JSON Schema (draft 2020-12) of the required fields, as a string. */
export const collectDataSchema = JSON.stringify({
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  required: collectFields.map((f) => f.name),
  additionalProperties: false,
  properties: {
    fullName: { type: 'string', title: 'Full name', minLength: 1, maxLength: 200 },
    dateOfBirth: { type: 'string', title: 'Date of birth', format: 'date' },
    country: {
      type: 'string',
      title: 'Country of residence',
      description: 'ISO 3166-1 alpha-2 code',
      pattern: '^[A-Z]{2}$',
    },
  },
})

export function collectDataUrl(publicBaseUrl: string, paymentId: string, optionId: string): string {
  const base = publicBaseUrl.replace(/\/+$/, '')
  return `${base}/collect/${encodeURIComponent(paymentId)}?option=${encodeURIComponent(optionId)}`
}

/** One problem per field, keyed by field name; empty when the data is acceptable. */
export function fieldProblems(fields: Readonly<Record<string, string>>, now: Date): Record<string, string> {
  const problems: Record<string, string> = {}
  for (const name of Object.keys(fields)) {
    if (!collectFields.some((f) => f.name === name)) problems[name] = 'is not a field of this form'
  }
  const fullName = fields.fullName?.trim() ?? ''
  if (fullName.length === 0 || fullName.length > 200) problems.fullName = 'is required (up to 200 characters)'
  const dob = fields.dateOfBirth ?? ''
  const date = /^\d{4}-\d{2}-\d{2}$/.test(dob) ? new Date(`${dob}T00:00:00Z`) : undefined
  if (!date || Number.isNaN(date.getTime()) || date.toISOString().slice(0, 10) !== dob) {
    problems.dateOfBirth = 'must be a date (YYYY-MM-DD)'
  } else if (date > now || date.getUTCFullYear() < 1900) {
    problems.dateOfBirth = 'must be a past date after 1900'
  }
  if (!/^[A-Z]{2}$/.test(fields.country ?? ''))
    problems.country = 'must be a two-letter country code (e.g. DE)'
  return problems
}

/** Throws `params_validation` naming the first bad field. */
export function assertFields(fields: Readonly<Record<string, string>>, now: Date): void {
  const [first] = Object.entries(fieldProblems(fields, now))
  if (first) throw paramsError(`fields.${first[0]}`, `${first[0]} ${first[1]}`)
}
