# `sgdlab claims` and `sgdlab lab check` (harness/cli/claims.c, lab.c,
# checks_*.c): real runs into a real database in a private directory.
foreach(mode exact planted badfile loaded)
  add_test(NAME claims_${mode}
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/claims_check.sh $<TARGET_FILE:sgdlab>
            ${CMAKE_SOURCE_DIR} ${mode})
  set_tests_properties(claims_${mode} PROPERTIES TIMEOUT 180)
endforeach()
foreach(lab 1 2 3 4 5 6 7 8 9 11 badpred blame)
  add_test(NAME lab_check_${lab}
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/lab_check.sh $<TARGET_FILE:sgdlab>
            ${CMAKE_SOURCE_DIR} ${lab})
  set_tests_properties(lab_check_${lab} PROPERTIES TIMEOUT 300)
endforeach()
# lab 10 (stragglers and SSP): six ps runs of 200 steps, twice (~1.5 min)
add_test(NAME lab_check_10
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/lab_check.sh $<TARGET_FILE:sgdlab>
          ${CMAKE_SOURCE_DIR} 10)
set_tests_properties(lab_check_10 PROPERTIES TIMEOUT 300)
# hostile numbers in a student's database (lab check, the report's Claims
# table) and in claim files: nothing is run
add_test(NAME hostile_checks
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/hostile_checks.sh $<TARGET_FILE:sgdlab>)
set_tests_properties(hostile_checks PROPERTIES TIMEOUT 300)
