import Testing
@Test func providersPlaceholder() {}
