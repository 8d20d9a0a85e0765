/* A shared library that is not a step library: no Cohort entry points. */
int plain_library_answer(void) { return 42; }
