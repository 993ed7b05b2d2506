// The outbound HTTP client, JWKS cache and provider token verification (issue 4).
