// Program-derived addresses without a chain SDK: the guard derives associated token accounts
// synchronously, in browsers and React Native alike (WebCrypto's digest is async and not everywhere).
import { decodeBase58, encodeBase58 } from '../../src/caip/base58.js'
import { associatedTokenProgramId } from './programs.js'

const sha256Constants = Uint32Array.from(
  '428a2f98 71374491 b5c0fbcf e9b5dba5 3956c25b 59f111f1 923f82a4 ab1c5ed5 d807aa98 12835b01 243185be 550c7dc3 72be5d74 80deb1fe 9bdc06a7 c19bf174 e49b69c1 efbe4786 0fc19dc6 240ca1cc 2de92c6f 4a7484aa 5cb0a9dc 76f988da 983e5152 a831c66d b00327c8 bf597fc7 c6e00bf3 d5a79147 06ca6351 14292967 27b70a85 2e1b2138 4d2c6dfc 53380d13 650a7354 766a0abb 81c2c92e 92722c85 a2bfe8a1 a81a664b c24b8b70 c76c51a3 d192e819 d6990624 f40e3585 106aa070 19a4c116 1e376c08 2748774c 34b0bcb5 391c0cb3 4ed8aa4a 5b9cca4f 682e6ff3 748f82ee 78a5636f 84c87814 8cc70208 90befffa a4506ceb bef9a3f7 c67178f2'
    .split(' ')
    .map((word) => Number.parseInt(word, 16)),
)

/** SHA-256 (FIPS 180-4). */
export function sha256(input: Uint8Array): Uint8Array {
  const bitLength = input.length * 8
  const padded = new Uint8Array(Math.ceil((input.length + 9) / 64) * 64)
  padded.set(input)
  padded[input.length] = 0x80
  const view = new DataView(padded.buffer)
  view.setUint32(padded.length - 8, Math.floor(bitLength / 2 ** 32))
  view.setUint32(padded.length - 4, bitLength >>> 0)
  const state = Uint32Array.of(
    0x6a09e667,
    0xbb67ae85,
    0x3c6ef372,
    0xa54ff53a,
    0x510e527f,
    0x9b05688c,
    0x1f83d9ab,
    0x5be0cd19,
  )
  const w = new Uint32Array(64)
  const rotr = (x: number, n: number) => (x >>> n) | (x << (32 - n))
  for (let block = 0; block < padded.length; block += 64) {
    for (let i = 0; i < 16; i++) w[i] = view.getUint32(block + i * 4)
    for (let i = 16; i < 64; i++) {
      const a = w[i - 15]!
      const b = w[i - 2]!
      const s0 = rotr(a, 7) ^ rotr(a, 18) ^ (a >>> 3)
      const s1 = rotr(b, 17) ^ rotr(b, 19) ^ (b >>> 10)
      w[i] = (w[i - 16]! + s0 + w[i - 7]! + s1) >>> 0
    }
    let [a, b, c, d, e, f, g, h] = state as unknown as number[] as [
      number,
      number,
      number,
      number,
      number,
      number,
      number,
      number,
    ]
    for (let i = 0; i < 64; i++) {
      const t1 =
        (h +
          (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) +
          ((e & f) ^ (~e & g)) +
          sha256Constants[i]! +
          w[i]!) >>>
        0
      const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) >>> 0
      h = g
      g = f
      f = e
      e = (d + t1) >>> 0
      d = c
      c = b
      b = a
      a = (t1 + t2) >>> 0
    }
    state[0]! += a
    state[1]! += b
    state[2]! += c
    state[3]! += d
    state[4]! += e
    state[5]! += f
    state[6]! += g
    state[7]! += h
  }
  const out = new Uint8Array(32)
  const outView = new DataView(out.buffer)
  for (let i = 0; i < 8; i++) outView.setUint32(i * 4, state[i]!)
  return out
}

// Ed25519's curve, -x^2 + y^2 = 1 + d x^2 y^2 over p = 2^255 - 19.
const p = 2n ** 255n - 19n
const d = (-121665n * modPow(121666n, p - 2n)) % p
const sqrtMinusOne = modPow(2n, (p - 1n) / 4n)

function mod(a: bigint): bigint {
  const r = a % p
  return r < 0n ? r + p : r
}

function modPow(base: bigint, exponent: bigint): bigint {
  let result = 1n
  let b = ((base % p) + p) % p
  for (let e = exponent; e > 0n; e >>= 1n) {
    if (e & 1n) result = (result * b) % p
    b = (b * b) % p
  }
  return result
}

/**
 * Whether 32 bytes are a valid compressed Ed25519 point, decoded strictly (y below p, no negative
 * zero), as web3.js and kit decide it: a program-derived address must not be one.
 */
export function isOnCurve(bytes: Uint8Array): boolean {
  let y = 0n
  for (let i = 31; i >= 0; i--) y = (y << 8n) | BigInt(i === 31 ? bytes[i]! & 0x7f : bytes[i]!)
  const negative = (bytes[31]! & 0x80) !== 0
  if (y >= p) return false
  const y2 = mod(y * y)
  const u = mod(y2 - 1n)
  const v = mod(d * y2 + 1n)
  // x = u v^3 (u v^7)^((p-5)/8), then fixed up by sqrt(-1) (RFC 8032, 5.1.3).
  const v3 = mod(v * v * v)
  let x = mod(u * v3 * modPow(u * v3 * v3 * v, (p - 5n) / 8n))
  const vx2 = mod(v * x * x)
  if (vx2 === mod(-u)) x = mod(x * sqrtMinusOne)
  else if (vx2 !== u) return false
  return !(x === 0n && negative)
}

const pdaMarker = new TextEncoder().encode('ProgramDerivedAddress')

function publicKeyBytes(address: string): Uint8Array {
  const bytes = decodeBase58(address)
  if (bytes?.length !== 32) throw new TypeError(`Not a Solana address: ${address}`)
  return bytes
}

/** `findProgramAddress`: the first bump from 255 down whose hash is off the curve. */
export function findProgramAddress(seeds: readonly Uint8Array[], programId: string): string {
  const program = publicKeyBytes(programId)
  const seedBytes = seeds.reduce((length, seed) => length + seed.length, 0)
  for (let bump = 255; bump >= 0; bump--) {
    const input = new Uint8Array(seedBytes + 1 + 32 + pdaMarker.length)
    let offset = 0
    for (const seed of seeds) {
      input.set(seed, offset)
      offset += seed.length
    }
    input[offset++] = bump
    input.set(program, offset)
    input.set(pdaMarker, offset + 32)
    const hash = sha256(input)
    if (!isOnCurve(hash)) return encodeBase58(hash)
  }
  throw new Error('No program address found for these seeds.')
}

/** The associated token account of `owner` for `mint` under `tokenProgram`. */
export function associatedTokenAddress(owner: string, mint: string, tokenProgram: string): string {
  return findProgramAddress(
    [publicKeyBytes(owner), publicKeyBytes(tokenProgram), publicKeyBytes(mint)],
    associatedTokenProgramId,
  )
}
