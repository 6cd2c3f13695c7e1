module example.com/payroll-sandbox-recipe

go 1.19
