/** What the service registers on every engine it assembles, beside the families. */
export interface FacilitatorSettings {
  /** ERC-8021 attribution: this service's builder code and service code. */
  builderCode: string | undefined;
  builderServiceCode: string | undefined;
}
