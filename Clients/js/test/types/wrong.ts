// Must NOT compile: the type check's control (a wrong field type and an unknown error code).
import { Gatehouse, type GatehouseErrorCode } from 'gatehouse-js';
const gatehouse = new Gatehouse({ url: 'https://auth.example.com', appKey: 'pk_live_example' });
void gatehouse.signIn({ email: 42, password: 'x' });
const code: GatehouseErrorCode = 'auth/no-such-code';
console.log(code);
// Two proofs at once are refused by the types.
void gatehouse.verifyMfa({ mfaToken: 'mfa_x', code: '123456', recoveryCode: 'abcde-fghij' });
// A web flow names its provider.
void gatehouse.startWebFlow({ redirectURI: 'https://app.example.com/cb' });
