const ownProperty = Object.prototype.hasOwnProperty

/** `Object.hasOwn`, which older WebViews (Safari < 15.4, Chrome < 93) and some Hermes builds lack. */
export function hasOwn(object: object, key: PropertyKey): boolean {
  return ownProperty.call(object, key)
}
