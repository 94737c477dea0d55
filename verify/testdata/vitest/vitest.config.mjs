// The cart suite is shared with the jest fixture, which has these globals.
export default { test: { globals: true } };
