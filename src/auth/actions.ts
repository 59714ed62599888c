/** The eleven actions of the reference, checked where the reference checks them. */
export const ACTIONS = [
  'location-update',
  'bucket-read',
  'bucket-read-versions',
  'bucket-update',
  'bucket-listmultiparts',
  'object-read',
  'object-read-version',
  'object-delete',
  'object-delete-version',
  'multipart-read',
  'multipart-delete',
] as const;

export type Action = (typeof ACTIONS)[number];

export function isAction(s: string): s is Action {
  return (ACTIONS as readonly string[]).includes(s);
}
