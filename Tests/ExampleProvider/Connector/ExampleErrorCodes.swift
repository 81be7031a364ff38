import PaypipeCore

/// The example provider's outcome codes, in the one catalogue.
extension OutcomeErrorCode {
    /// The provider declined the charge.
    public static let exampleDeclined = OutcomeErrorCode(rawValue: "EXAMPLE_DECLINED")
    /// The provider answered something that is not a charge.
    public static let exampleBadResponse = OutcomeErrorCode(rawValue: "EXAMPLE_BAD_RESPONSE")
    /// A pending charge was still undecided when polling gave up.
    public static let exampleNotDecided = OutcomeErrorCode(rawValue: "EXAMPLE_NOT_DECIDED")
}
